"""Every flag that more than one command takes, defined once; and the settings cascade they feed.

Each command turns its flags into one frozen Settings (condapipe.buildspec.settings) at the top
and passes that down: no module below the CLI reads flags, the config file or the environment for
a setting. Flags are plain strings here and validated in condapipe.buildspec.build_spec, so every
mistake is a one-line error (exit 2) instead of click's multi-line usage text.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from condapipe.buildspec.settings import Settings, resolve_settings

F = TypeVar("F", bound=Callable[..., Any])

CUDA_HELP = "CUDA version X.Y or cpu; repeat for several."

_SPEC_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--version", "version"),
        {"help": "Upstream version, e.g. 2.4.1 (pytorch: default the newest built for the CUDA)."},
    ),
    (("--build-number", "build_number"), {"help": "Package build number (default 0)."}),
    (("--python", "python"), {"multiple": True, "help": "Python version; repeat for several."}),
    (("--cuda", "cuda"), {"multiple": True, "help": CUDA_HELP}),
    (("--cudnn", "cudnn"), {"help": "cuDNN version (default: the CUDA table's)."}),
    (
        ("--arch", "arch"),
        {"help": "GPU archs: '8.0;8.6+PTX', sm_90, 9.0a, a family (Ampere, Hopper, ...) or native."},
    ),
    (("--platform", "platform"), {"help": "linux-64 (default) or linux-aarch64."}),
    (("--blas", "blas"), {"help": "mkl (default on linux-64) or openblas."}),
    (("--source", "source"), {"help": "Local checkout DIR, tarball URL or git+URL@REV (default: upstream)."}),
    (
        ("--jetson", "jetson"),
        {
            "metavar": "BOARD",
            "help": "NVIDIA Jetson board (nano, tx2, xavier, orin): linux-aarch64 with its JetPack's "
            "CUDA/cuDNN and arch, OpenBLAS, no NCCL, no magma.",
        },
    ),
    (("--env", "env"), {"multiple": True, "metavar": "NAME=VALUE", "help": "Extra build env; repeatable."}),
    (
        ("--config", "config"),
        {"help": "Config file (default: ./condapipe.toml or [tool.condapipe] in ./pyproject.toml)."},
    ),
)


def spec_options(func: F) -> F:
    """Add the spec flags (--version --build-number --python --cuda --cudnn --arch --platform
    --blas --source --jetson --env --config) to a click command."""
    for decls, attrs in reversed(_SPEC_OPTIONS):
        func = click.option(*decls, default=None if not attrs.get("multiple") else (), **attrs)(func)
    return func


def with_option(func: F) -> F:
    """--with FAMILY (repeatable): build a family that is built against the package in the same plan."""
    return click.option(
        "--with",
        "companions",
        multiple=True,
        metavar="FAMILY",
        help="Also build FAMILY against this build, in the same plan and after it (e.g. pytorch "
        "--with torchvision: the paired release, same Python, CUDA and archs, pinned to this build).",
    )(func)


def single_cuda_option(default: str | None, help_text: str) -> Callable[[F], F]:
    """--cuda for commands about one build (patches, verify): one value, not repeatable."""
    return click.option(
        "--cuda", metavar="VERSION", default=default, show_default=default is not None, help=help_text
    )


def settings_from_flags(
    package: str | None, params: Mapping[str, Any], *, compile_cache: str | None = None
) -> Settings:
    """The command's one Settings: the config file named by --config (or found), the environment,
    then the flags in `params` (a click command's keyword arguments)."""
    flags = dict(params)
    if compile_cache:
        flags["compile_cache"] = compile_cache
    config = params.get("config")
    return resolve_settings(package, flags, environ=os.environ, config_path=Path(config) if config else None)

"""The spec flags shared by render, build, doctor and config show, and their merge with the config file.

One decorator and one function so that every command spells the flags the same way and
resolves them with the same precedence: CLI flag > [packages.<name>] > config file top level >
data tables. Flags are read as plain strings and validated in condapipe.buildspec.build_spec, so every mistake
is a one-line UsageError (exit 2) instead of click's multi-line usage text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from condapipe.buildspec.build_spec import BuildSpec, build_spec, check_forms
from condapipe.buildspec.config_file import load_config, spec_settings
from condapipe.buildspec.defaults import Choice, FoundToolkit, fill_defaults
from condapipe.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])

# click parameter name -> config/spec key
PARAM_KEYS: dict[str, str] = {
    "version": "version",
    "build_number": "build_number",
    "python": "python",
    "cuda": "cuda",
    "cudnn": "cudnn",
    "arch": "arch",
    "platform": "platform",
    "blas": "blas",
    "source": "source",
    "env": "env",
    "jetson": "jetson",
}

_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--version", "version"),
        {"help": "Upstream version, e.g. 2.4.1 (pytorch: default the newest built for the CUDA)."},
    ),
    (("--build-number", "build_number"), {"help": "Package build number (default 0)."}),
    (("--python", "python"), {"multiple": True, "help": "Python version; repeat for several."}),
    (("--cuda", "cuda"), {"multiple": True, "help": "CUDA version X.Y or cpu; repeat for several."}),
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
    for decls, attrs in reversed(_OPTIONS):
        func = click.option(*decls, default=None if not attrs.get("multiple") else (), **attrs)(func)
    return func


def _parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env expects NAME=VALUE, not {pair!r}")
        env[name] = value
    return env


def cli_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The spec keys the user gave as flags (absent flags are left out, not None)."""
    out: dict[str, Any] = {}
    for param, key in PARAM_KEYS.items():
        value = params.get(param)
        if value is None or value == ():
            continue
        if param == "env":
            out[key] = _parse_env(tuple(value))
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


def config_path(params: dict[str, Any]) -> Path | None:
    value = params.get("config")
    return Path(value) if value else None


def resolve_package(package: str | None, params: dict[str, Any]) -> str:
    """PACKAGE from the command line, else `package` from the config file."""
    if package:
        return package
    config = load_config(config_path(params))
    if config.get("package"):
        return str(config["package"])
    raise UsageError("no package given: name one (e.g. pytorch) or set `package` in condapipe.toml")


def merged_settings(package: str, params: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """Config file settings for ``package`` overridden by the CLI flags, plus the CLI keys."""
    config = load_config(config_path(params))
    settings = spec_settings(config, package)
    cli = cli_settings(params)
    if "env" in cli:
        cli["env"] = {**settings.get("env", {}), **cli["env"]}
    settings.update(cli)
    return settings, frozenset(cli)


def spec_from_cli(package: str, params: dict[str, Any]) -> BuildSpec:
    """Build the BuildSpec for ``package`` from a click command's params (spec_options flags)."""
    settings, from_cli = merged_settings(package, params)
    return build_spec(package, settings, from_cli=from_cli)


def spec_with_defaults(
    package: str,
    params: dict[str, Any],
    *,
    toolkits: Callable[[], Sequence[FoundToolkit]],
    python: str | None = None,
    command: str | None = None,
) -> tuple[BuildSpec, tuple[Choice, ...]]:
    """Like spec_from_cli, with what flags and config file leave open filled in from the tables and
    the machine (condapipe.buildspec.defaults): the BuildSpec and the choices made, for the CLI to print."""
    settings, from_cli = merged_settings(package, params)
    check_forms(settings)  # a malformed value is refused, never replaced by a default
    settings, choices = fill_defaults(package, settings, toolkits=toolkits, python=python, command=command)
    return build_spec(package, settings, from_cli=from_cli), choices


def echo_spec_warnings(spec: BuildSpec) -> None:
    """Print the spec's warnings to stderr, one unwrapped line each ("warning: ...")."""
    for warning in spec.warnings:
        click.echo(f"warning: {warning}", err=True)

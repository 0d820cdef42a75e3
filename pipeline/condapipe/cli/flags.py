"""Every flag that more than one command takes, defined once; and the settings cascade they feed.

Each command turns its flags into one frozen Settings (condapipe.buildspec.settings) at the top
and passes that down: no module below the CLI reads flags, the config file or the environment for
a setting. Flags are plain strings here and validated in condapipe.buildspec.build_spec, so every
mistake is a one-line error (exit 2) instead of click's multi-line usage text.

Names follow the tools people come from: conda-build / rattler-build spellings are aliases of what
condapipe already does (`-m/--variant-config FILE` → --python/--cuda/--platform/--blas,
`--target-platform` → --platform, `--output-folder` → --output-dir), and anaconda-client's
`-u/--user` names the upload owner. `-c/--channel` is a channel searched for dependencies (as in
`conda build -c`) in build and plan; in `upload`, `--channel` is the owner uploaded to (as
anaconda.org calls it), also spelled `--owner` / `-u` / `--user`.
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
    (
        ("--platform", "--target-platform", "platform"),
        {"help": "linux-64 (default) or linux-aarch64 (--target-platform: the conda-build name)."},
    ),
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
    (
        ("-m", "--variant-config", "--variants", "variant_config"),
        {
            "multiple": True,
            "metavar": "FILE",
            "help": "conda-build/rattler-build variant file (conda_build_config.yaml): its python, "
            "cuda_compiler_version, target_platform and blas_impl as --python/--cuda/--platform/--blas.",
        },
    ),
)


def spec_options(func: F) -> F:
    """Add the spec flags (--version --build-number --python --cuda --cudnn --arch --platform
    --blas --source --jetson --env --config -m/--variant-config) to a click command."""
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


def engine_option(help_text: str, *, default: str | None = "auto") -> Callable[[F], F]:
    """--engine auto|conda-build|rattler-build: which engine builds (build), would build (doctor) or
    every job's build gets (plan; default: each job's own auto)."""
    from condapipe.engines import ENGINE_NAMES

    return click.option(
        "--engine",
        type=click.Choice(ENGINE_NAMES),
        default=default,
        show_default=default is not None,
        help=help_text,
    )


def compile_cache_option(help_text: str) -> Callable[[F], F]:
    """--compile-cache: a local ccache directory or a store sccache shares (config key compile_cache;
    $CONDAPIPE_COMPILE_CACHE is the user's own cache, which build.sh uses as it is)."""
    return click.option(
        "--compile-cache", metavar="DIR|redis://HOST:PORT|s3://BUCKET/PREFIX", default=None, help=help_text
    )


def no_test_option(help_text: str) -> Callable[[F], F]:
    """--no-test: skip the recipe's tests (build; plan passes it to every job)."""
    return click.option("--no-test", is_flag=True, help=help_text)


def jobs_option(help_text: str) -> Callable[[F], F]:
    """-j/--jobs N: parallel workers of a command that reads many files (0: all cores)."""
    return click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, help=help_text)


def target_platform_option(help_text: str, *, default: str | None = None) -> Callable[[F], F]:
    """--platform of a command about one package or build (patches, verify): one conda subdir. (The
    spec flags have their own --platform/--target-platform, which the settings cascade reads.)"""
    from condapipe.buildspec.build_spec import PLATFORMS

    return click.option(
        "--platform",
        type=click.Choice(PLATFORMS),
        default=default,
        show_default=default is not None,
        help=help_text,
    )


def force_option(help_text: str) -> Callable[[F], F]:
    """--force: go past what the command otherwise refuses; each command says what (its help)."""
    return click.option("--force", is_flag=True, help=help_text)


def offline_option(help_text: str) -> Callable[[F], F]:
    """--offline: search local channels only (the output dir, -c directories), no network."""
    return click.option("--offline", is_flag=True, help=help_text)


def build_prefix_option(help_text: str) -> Callable[[F], F]:
    """--build-prefix PATH (repeatable): a build prefix or work dir a package must not point into."""
    return click.option("--build-prefix", "build_prefixes", multiple=True, metavar="PATH", help=help_text)


def output_option(dest: str, help_text: str) -> Callable[[F], F]:
    """-o/--output: what the command writes (plan: a workflow file; render: the recipe dir)."""
    return click.option("-o", "--output", dest, default=None, help=help_text)


class LocalChannelPath(click.ParamType):
    """A local channel folder given as DIR or file:///DIR (anaconda-client's and conda's spelling);
    '' and / are refused, a remote URL too."""

    name = "DIR|file://DIR"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from condapipe.publish.local_channel import channel_dir_from_target

        return value if isinstance(value, Path) else channel_dir_from_target(str(value))


def to_channel_option(help_text: str, *, required: bool = False) -> Callable[[F], F]:
    """--to DIR|file://DIR: the local channel a command writes packages into (wheels, upload)."""
    return click.option("--to", "to", type=LocalChannelPath(), required=required, help=help_text)


def single_cuda_option(default: str | None, help_text: str) -> Callable[[F], F]:
    """--cuda for commands about one build (patches, verify): one value, not repeatable."""
    return click.option(
        "--cuda", metavar="VERSION", default=default, show_default=default is not None, help=help_text
    )


def json_option(func: F) -> F:
    """Add --json: print a machine-readable result instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(func)


def dry_run_option(func: F) -> F:
    """Add --dry-run: say what would change without changing anything."""
    return click.option("--dry-run", is_flag=True, help="Show what would be done; change nothing.")(func)


class FolderPath(click.Path):
    """click.Path that refuses '' and / (click turns '' into `.`, the current directory, silently)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from condapipe.safe_paths import destination

        if isinstance(value, str):
            name = param.opts[0] if param is not None and param.opts else (param.name if param else "path")
            destination(value, name or "path")
        return super().convert(value, param, ctx)


def output_dir_option(help_text: str, *, channel: bool = True) -> Callable[[F], F]:
    """Add --output-dir (alias --output-folder, conda-build's name): the local channel (default
    ./channel); or, `channel=False` (fix: -o/--output-dir), a folder for the command's output,
    none by default."""
    from condapipe.cli.output import DEFAULT_OUTPUT_DIR

    names = ("--output-dir", "--output-folder") if channel else ("-o", "--output-dir", "--output-folder")
    return click.option(
        *names,
        "output_dir",
        type=FolderPath(path_type=Path, file_okay=False),
        default=DEFAULT_OUTPUT_DIR if channel else None,
        show_default=channel,
        help=help_text,
    )


def work_dir_option(help_text: str) -> Callable[[F], F]:
    """Add --work-dir (default ./.condapipe): recipes, scratch space, state and logs."""
    from condapipe.cli.output import DEFAULT_WORK_DIR

    return click.option(
        "--work-dir",
        type=FolderPath(path_type=Path, file_okay=False),
        default=DEFAULT_WORK_DIR,
        show_default=True,
        help=help_text,
    )


def dependency_channels_option(help_text: str) -> Callable[[F], F]:
    """Add -c/--channel (repeatable): channels searched for dependencies, as in `conda build -c`."""
    return click.option("-c", "--channel", "channels", multiple=True, metavar="CHANNEL", help=help_text)


def upload_owner_option(func: F) -> F:
    """Add the anaconda.org owner: --channel (anaconda.org's word), --owner, -u/--user (anaconda upload's)."""
    return click.option(
        "--channel",
        "--owner",
        "-u",
        "--user",
        "owner",
        metavar="ORG",
        help="anaconda.org owner (user or organisation) to upload to; --owner, -u and --user are the same. "
        "(In `build` and `plan`, -c/--channel is a channel searched for dependencies instead.)",
    )(func)


def with_variant_config(params: Mapping[str, Any]) -> dict[str, Any]:
    """`params` with the values of -m/--variant-config files filled in where no flag was given
    (an explicit flag wins over the file), and the variant_config key itself removed."""
    flags = dict(params)
    variant_files = tuple(flags.pop("variant_config", None) or ())
    if variant_files:
        from condapipe.buildspec.variant_config import variant_flags

        for key, value in variant_flags([Path(f) for f in variant_files]).items():
            if flags.get(key) in (None, ()):
                flags[key] = value
    return flags


def settings_from_flags(
    package: str | None, params: Mapping[str, Any], *, compile_cache: str | None = None
) -> Settings:
    """The command's one Settings: the config file named by --config (or found), the environment,
    then the flags in `params` (a click command's keyword arguments, -m variant files included)."""
    flags = with_variant_config(params)
    if compile_cache:
        flags["compile_cache"] = compile_cache
    config = params.get("config")
    return command_settings(package, flags, config_path=Path(config) if config else None)


def command_settings(
    package: str | None, flags: Mapping[str, Any], *, config_path: Path | None = None
) -> Settings:
    """resolve_settings with this process's environment, and the command-wide values the settings
    decide put in place (the channel timeout every probe and solve of this command uses)."""
    from condapipe.plan.build_channels import use_channel_timeout

    settings = resolve_settings(package, flags, environ=os.environ, config_path=config_path)
    use_channel_timeout(settings.channel_timeout)
    return settings

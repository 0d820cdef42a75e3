"""`condapipe build PACKAGE|RECIPE_DIR`: render (for a package family) and build with an engine.

A family name (pytorch, magma, cuda-smoke, ...) goes spec -> render -> engine; a directory the
user wrote (meta.yaml and/or recipe.yaml) goes straight to the engine, so the tool is useful
for any recipe. Packages land in --output-dir, which is kept a valid local channel.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import click
from condapipe.engines import ENGINE_NAMES, BuildOptions, engine_for_recipe, recipe_formats
from condapipe.engines.base import PACKAGE_FORMATS
from condapipe.errors import UsageError
from condapipe.output import console, dry_run_option, err_console, json_option, print_json
from condapipe.spec_options import cli_settings, spec_from_cli, spec_options
from rich.table import Table

# Spec flags that mean something for a recipe directory; the rest describe a family build.
_DIR_FLAGS = ("python", "platform", "env")


def _given(value: Any) -> bool:
    return value not in (None, (), [], "", False)


def _recipe_dir_target(target: str) -> Path | None:
    """`target` as a recipe directory, or None when it names a package family."""
    path = Path(target)
    if path.is_dir() and recipe_formats(path):
        return path
    if path.is_dir() or "/" in target or target in (".", ".."):
        if not path.is_dir():
            raise UsageError(f"{target}: no such directory")
        raise UsageError(f"{target} holds neither meta.yaml nor recipe.yaml")
    return None


@click.command("build")
@click.argument("target", metavar="PACKAGE|RECIPE_DIR")
@spec_options
@click.option(
    "--engine",
    type=click.Choice(ENGINE_NAMES),
    default="auto",
    show_default=True,
    help="auto: conda-build when `conda build` is installed, else rattler-build.",
)
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("channel"),
    show_default=True,
    help="Local channel the packages go into (also the first channel searched).",
)
@click.option(
    "--work-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path(".condapipe"),
    show_default=True,
    help="Rendered recipes, engine scratch space and build logs.",
)
@click.option("-c", "--channel", "channels", multiple=True, help="Extra channel for dependencies.")
@click.option("--override-channels", is_flag=True, help="Search only the output dir and the -c channels.")
@click.option("--package-format", type=click.Choice(PACKAGE_FORMATS), default="conda", show_default=True)
@click.option("--compression-level", type=int, help="zstd level 1-22 for .conda, bzip2 1-9 for .tar.bz2.")
@click.option("--no-test", is_flag=True, help="Skip the recipe's tests.")
@dry_run_option
@json_option
def command(
    target: str,
    engine: str,
    output_dir: Path,
    work_dir: Path,
    channels: tuple[str, ...],
    override_channels: bool,
    package_format: str,
    compression_level: int | None,
    no_test: bool,
    dry_run: bool,
    as_json: bool,
    **spec_params: Any,
) -> None:
    """Build a package family (e.g. cuda-smoke, magma, pytorch) or a recipe directory."""
    recipe_dir = _recipe_dir_target(target)
    scratch: Path | None = None
    if recipe_dir is not None:
        extra = sorted(k for k, v in spec_params.items() if _given(v) and k not in _DIR_FLAGS)
        if extra:
            flags = ", ".join("--" + k.replace("_", "-") for k in extra)
            raise UsageError(f"{flags} only apply to package families, not to the recipe directory {target}")
        pythons = tuple(spec_params.get("python") or ())
        platform = spec_params.get("platform") or None
        env = tuple(sorted(cli_settings(spec_params).get("env", {}).items()))
        mode = "recipe-dir"
    else:
        from condapipe.render import render_recipe

        spec = spec_from_cli(target, spec_params)
        final_dir = work_dir / "recipes" / target
        if dry_run:  # render into a scratch dir: a dry run changes nothing under --work-dir
            scratch = Path(tempfile.mkdtemp(prefix="condapipe-build-dry-"))
        recipe_dir = scratch / target if scratch else final_dir
        render_recipe(spec, recipe_dir)
        pythons, platform, env, mode = spec.pythons, spec.platform, spec.extra_env, "family"
    try:
        chosen, why = engine_for_recipe(recipe_dir, engine)
        options = BuildOptions(
            output_dir=output_dir,
            work_dir=work_dir,
            channels=channels,
            override_channels=override_channels,
            pythons=pythons,
            package_format=package_format,
            compression_level=compression_level,
            run_tests=not no_test,
            target_platform=platform,
            env=env,
        )
        head = {"target": target, "mode": mode, "engine": chosen.name, "engine_reason": why}
        if dry_run:
            actions = chosen.describe(recipe_dir, options)
            if scratch is not None:
                actions = [a.replace(str(recipe_dir), str(final_dir)) for a in actions]
            if as_json:
                print_json({**head, "dry_run": True, "actions": actions})
            else:
                console.print(f"would build {target} with {chosen.name} ({why}):")
                for action in actions:
                    console.print(f"  {action}", soft_wrap=True)
            return
        err_console.print(f"building {target} with {chosen.name} ({why})")
        result = chosen.build(recipe_dir, options)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if as_json:
        print_json({**head, "recipe_dir": str(recipe_dir), **result.to_dict()})
        return
    table = Table(title=f"{target}: built with {result.engine} in {result.seconds:.1f} s")
    table.add_column("package")
    table.add_column("size", justify="right")
    for pkg in result.packages:
        table.add_row(str(pkg), f"{pkg.stat().st_size / 1024:.1f} KiB")
    console.print(table)
    console.print(f"log: {result.log_path}")

"""`condapipe build PACKAGE|RECIPE_DIR`: build a package family through the plan, or a recipe dir.

A family name (pytorch, magma, cuda-smoke, ...) goes doctor -> resumable plan (prerequisites,
render -> engine -> fix -> verify -> test -> publish per variant; condapipe.cli.family_build); a directory the
user wrote (meta.yaml and/or recipe.yaml) goes straight to the engine, so the tool is useful
for any recipe. Packages land in --output-dir, which is kept a valid local channel.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from condapipe.build import (
    ENGINE_NAMES,
    BuildOptions,
    Engine,
    EngineResult,
    engine_for_recipe,
    recipe_formats,
)
from condapipe.build.base import PACKAGE_FORMATS
from condapipe.cli.output import (
    console,
    dry_run_option,
    echo_lines,
    err_console,
    json_option,
    output_dir_option,
    print_json,
    work_dir_option,
)
from condapipe.errors import BuildFailed, UsageError
from condapipe.spec.options import cli_settings, spec_from_cli, spec_options

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
@output_dir_option("Local channel the packages go into (also the first channel searched).")
@work_dir_option("Rendered recipes, engine scratch space and build logs.")
@click.option("-c", "--channel", "channels", multiple=True, help="Extra channel for dependencies.")
@click.option("--override-channels", is_flag=True, help="Search only the output dir and the -c channels.")
@click.option("--package-format", type=click.Choice(PACKAGE_FORMATS), default="conda", show_default=True)
@click.option("--compression-level", type=int, help="zstd level 1-22 for .conda, bzip2 1-9 for .tar.bz2.")
@click.option("--no-test", is_flag=True, help="Skip the recipe's tests.")
@click.option("--force", is_flag=True, help="Build even when `condapipe doctor` finds a blocking problem.")
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
    force: bool,
    dry_run: bool,
    as_json: bool,
    **spec_params: Any,
) -> None:
    """Build a package family (cuda-smoke, magma, pytorch, ...) or a recipe directory."""
    recipe_dir = _recipe_dir_target(target)
    if recipe_dir is None:  # a package family: doctor, then the resumable plan (condapipe.cli.family_build)
        from condapipe.cli.family_build import FamilyBuild, build_family
        from condapipe.plan import PlanOptions

        plan_options = PlanOptions(
            output_dir=output_dir.absolute(),
            work_dir=work_dir.absolute(),
            engine=engine,
            channels=channels,
            override_channels=override_channels,
            package_format=package_format,
            compression_level=compression_level,
            run_tests=not no_test,
            echo=echo_lines(),
        )
        spec = spec_from_cli(target, spec_params)
        build_family(FamilyBuild(spec, plan_options, force=force, dry_run=dry_run, as_json=as_json))
        return
    extra = sorted(k for k, v in spec_params.items() if _given(v) and k not in _DIR_FLAGS)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise UsageError(f"{flags} only apply to package families, not to the recipe directory {target}")
    pythons = tuple(spec_params.get("python") or ())
    platform = spec_params.get("platform") or None
    env = tuple(sorted(cli_settings(spec_params).get("env", {}).items()))
    chosen, why = engine_for_recipe(recipe_dir, engine)
    options = BuildOptions(
        # The engine's own output folder; the packages are then published into --output-dir.
        output_dir=work_dir / "staging" / recipe_dir.resolve().name,
        work_dir=work_dir,
        channels=tuple(dict.fromkeys((str(output_dir.resolve()), *channels))),
        override_channels=override_channels,
        pythons=pythons,
        package_format=package_format,
        compression_level=compression_level,
        run_tests=not no_test,
        target_platform=platform,
        env=env,
        echo=echo_lines(),
    )
    head = {"target": target, "mode": "recipe-dir", "engine": chosen.name, "engine_reason": why}
    if dry_run:
        actions = [*chosen.describe(recipe_dir, options), f"publish into: {output_dir}"]
        if as_json:
            print_json({**head, "dry_run": True, "actions": actions})
        else:
            console.print(f"would build {target} with {chosen.name} ({why}):")
            for action in actions:
                console.print(f"  {action}", soft_wrap=True)
        return
    err_console.print(f"building {target} with {chosen.name} ({why})")
    result = build_and_publish(chosen, recipe_dir, options, output_dir)
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


def build_and_publish(engine: Engine, recipe_dir: Path, options: BuildOptions, channel: Path) -> EngineResult:
    """Build into a fresh staging folder, publish into `channel`; the result names the published files.

    Both local channels the engine searches are indexed first (publish stage): rattler-build's
    test step fails on an unindexed one. A rebuild under the same file name replaces the package.
    """
    from condapipe.publish.channel import ensure_channel, publish_packages
    from condapipe.publish.upload_result import Status

    staging = options.output_dir
    shutil.rmtree(staging, ignore_errors=True)  # stale packages there must not satisfy dependencies
    ensure_channel(staging)
    ensure_channel(channel)
    try:
        result = engine.build(recipe_dir, options)
        outcomes, _ = publish_packages(channel, result.packages, force=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    failed = [f"{o.basename}: {o.detail}" for o in outcomes if o.status is Status.FAILED]
    if failed:
        raise BuildFailed(
            f"publishing into {channel} failed: {'; '.join(failed)}", log_path=str(result.log_path)
        )
    return dataclasses.replace(result, packages=tuple(Path(o.target) for o in outcomes))

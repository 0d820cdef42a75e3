"""What `condapipe build RECIPE_DIR` does: the recipe through the same resumable plan as a family.

build -> fix -> verify -> test -> publish, so a user's own recipe gets what a family build gets:
relocatable rpaths, a verified package compressed once at the final level, its tests run on the
package as published, and a channel that never holds an unverified package. Kept out of the
click command so the command stays argument plumbing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condapipe.cli.output import console, err_console, print_json
from condapipe.cli.plan_run import live_table_shown, run_and_report
from condapipe.cli.plan_text import plan_lines, shown_path
from condapipe.cli.resolve_step import resolve_before_building
from condapipe.engines import engine_for_recipe
from condapipe.engines.base import BuildOptions
from condapipe.plan import (
    PlanOptions,
    PlanResult,
    describe,
    make_recipe_plan,
    print_summary,
    write_report,
)
from condapipe.plan.build_channels import ChannelSetup
from condapipe.plan.runner import step_dir_for
from condapipe.plan.steps import engine_compression_level, engine_compression_threads


@dataclass(frozen=True)
class RecipeBuild:
    """Everything `build RECIPE_DIR` was asked, after argument parsing."""

    target: str  # as the user typed it (shown back)
    recipe_dir: Path
    options: PlanOptions
    pythons: tuple[str, ...] = ()
    platform: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # --env, else the config file's [env] (the settings')
    variant_files: tuple[Path, ...] = ()  # -m files, after the recipe's own variant file
    dry_run: bool = False
    as_json: bool = False
    channels: ChannelSetup | None = None  # probed channels: the recipe's environments are solved first


def build_recipe_dir(request: RecipeBuild) -> PlanResult | None:
    """Plan → (dry run: describe) → run → report. Raises what the failing step raised."""
    options = request.options
    engine, why = engine_for_recipe(request.recipe_dir, options.engine)
    head: dict[str, Any] = {
        "target": request.target,
        "mode": "recipe-dir",
        "recipe_dir": str(request.recipe_dir),
        "engine": engine.name,
        "engine_reason": why,
    }
    plan = make_recipe_plan(
        [request.recipe_dir],
        options,
        pythons=request.pythons,
        platform=request.platform,
        variant_files=request.variant_files,
        env=request.env,
    )
    resolution = resolve_before_building(
        plan, request.channels, run_tests=options.run_tests, dry_run=request.dry_run, as_json=request.as_json
    )
    if resolution is not None:
        head["resolve"] = resolution.to_dict()
    if request.dry_run:
        build_step = next(s.id for s in plan.steps if s.kind == "build")
        engine_options = BuildOptions(
            output_dir=step_dir_for(options.work_dir, build_step) / "out",
            work_dir=options.work_dir,
            channels=options.search_channels(),
            override_channels=options.override_channels,
            pythons=request.pythons,
            package_format=options.package_format,
            compression_level=engine_compression_level(options),
            compression_threads=engine_compression_threads(options),
            run_tests=options.run_tests,
            pack_from_stage=options.pack_from_stage,
            target_platform=request.platform,
            variant_files=request.variant_files,
        )
        rows = describe(plan)
        actions = [
            *engine.describe(request.recipe_dir, engine_options),
            *(f"{row['action']} {row['id']}: {row['title']} ({row['why']})" for row in rows),
            f"publish into: {shown_path(options.output_dir)}",
        ]
        if request.as_json:
            print_json({**head, "dry_run": True, "actions": actions, "steps": rows})
        else:
            console.print(f"would build {request.target} with {engine.name} ({why}):", markup=False)
            lines = [
                *(f"  {line}" for line in engine.describe(request.recipe_dir, engine_options)),
                *plan_lines(rows, output_dir=options.output_dir, work_dir=options.work_dir),
            ]
            for line in lines:
                console.print(line, soft_wrap=True, markup=False, highlight=False)
        if resolution is not None and not resolution.ok:
            raise resolution.problem()
        return None
    if resolution is not None and not resolution.ok:
        raise resolution.problem()
    err_console.print(f"building {request.target} with {engine.name} ({why})")
    result, error, report = run_and_report(plan, request.options.channels)
    paths = write_report(report, plan.work_dir)
    if request.as_json:
        print_json({**report, **head})
    else:
        print_summary(report, console, paths, steps_shown=live_table_shown())
    if error is not None:
        raise error
    return result

"""What `condapipe build <family>` does: preflight, plan, run (resuming), report.

Kept out of the click command so the build command stays argument plumbing, and so tests and
other front ends run exactly the same sequence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.compile_cache import (
    COMPILE_CACHE_ENV,
    ccache_runs,
    resume_families,
    shared_compile_cache,
)
from condapipe.cli.output import console, err_console, print_json
from condapipe.cli.plan_run import live_table_shown, run_and_report
from condapipe.cli.plan_text import input_lines, plan_lines
from condapipe.cli.resolve_step import resolve_before_building
from condapipe.doctor import DoctorReport, Machine, run_doctor
from condapipe.plan import (
    Plan,
    PlanOptions,
    PlanResult,
    describe,
    make_family_plan,
    print_summary,
    write_report,
)
from condapipe.plan.build_channels import ChannelSetup
from condapipe.plan.source_probe import raise_source_problems, source_problems
from condapipe.render.families._common import family_data


@dataclass(frozen=True)
class FamilyBuild:
    """Everything `build <family>` was asked, after argument parsing and preflight."""

    spec: BuildSpec  # with the toolkit roots doctor found
    options: PlanOptions
    doctor: DoctorReport
    force: bool = False  # build despite blocking doctor findings
    dry_run: bool = False
    as_json: bool = False
    variant: str | None = None  # --variant ID: build only that variant of the plan
    channels: ChannelSetup | None = None  # probed channels: the plan's environments are solved first
    doctor_command: str = "condapipe doctor"  # the doctor command that checks this same target
    companions: tuple[str, ...] = ()  # --with FAMILY: built against the spec in the same plan
    companion_sources: Mapping[str, str] = field(default_factory=dict)  # [packages.FAMILY] source
    offline: bool = False  # --offline: a remote source cannot be fetched either


@dataclass(frozen=True)
class Preflight:
    """What doctor found, and what it adds to the build: the toolkit switch and build environment."""

    doctor: DoctorReport
    spec: BuildSpec  # the spec with the toolkit roots doctor found
    env: tuple[tuple[str, str], ...]  # the build environment: compile cache, then MAX_JOBS etc.


def _recipe_takes_compile_cache(package: str) -> bool:
    return COMPILE_CACHE_ENV in (family_data(package).get("passthrough") or ())


def preflight(
    spec: BuildSpec,
    *,
    work_dir: Path,
    engine: str,
    env: Mapping[str, str] | None = None,
    environ: Mapping[str, str],
    output_dir: Path | None = None,
) -> Preflight:
    """Doctor for the spec; its build env (MAX_JOBS, ...) and toolkit switch, and the compile cache
    several Pythons share (condapipe.buildspec.compile_cache decides), for the one PlanOptions.
    `environ` is the command's (Settings.environ): the machine doctor checks, the user's own cache."""
    report = run_doctor(spec, Machine.from_environ(work_dir, environ, output_dir=output_dir), engine=engine)
    merged = dict(env or {})
    for key, value in report.build_env:
        merged.setdefault(key, value)
    if COMPILE_CACHE_ENV not in merged:
        shared = shared_compile_cache(
            environ=environ,
            pythons=len(spec.pythons),
            work_dir=work_dir,
            recipe_passes_it=_recipe_takes_compile_cache(spec.package),
            ccache_found=ccache_runs(),
            resumable=spec.package in resume_families(),
        )
        merged.update(shared.env if shared else ())
    return Preflight(report, spec.with_toolkit_roots(dict(report.cuda_homes)), tuple(sorted(merged.items())))


def _print_plan(plan: Plan, rows: list[dict[str, Any]]) -> None:
    """The dry run's short lines (condapipe.cli.plan_text); every step's inputs too with --debug."""
    lines = plan_lines(rows, output_dir=plan.output_dir, work_dir=plan.work_dir, notes=plan.notes)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and (ctx.find_root().params.get("debug") or (ctx.obj or {}).get("debug")):
        lines += input_lines(rows)
    for line in lines:  # plain text: inputs hold brackets that are not rich markup
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def build_family(request: FamilyBuild) -> PlanResult | None:
    """Preflight → plan → (dry run: describe, then exit as the real run would) → run → report.

    Raises what the failing step raised; a dry run raises the preflight's EnvironmentProblem (exit 3)
    after printing the plan with its steps marked "stop", as the real run would stop there."""
    doctor, options = request.doctor, request.options
    for finding in doctor.findings:
        if finding.level in ("warn", "block"):
            err_console.print(
                f"doctor: {finding.level}: {finding.message} (fix: {finding.fix})", soft_wrap=True
            )
    if request.dry_run:
        plan = make_family_plan(
            request.spec, options, request.variant, request.companions, request.companion_sources
        )
        rows = describe(plan)
        resolution = resolve_before_building(
            plan, request.channels, run_tests=options.run_tests, dry_run=True, as_json=request.as_json
        )
        unresolved = resolution is not None and not resolution.ok
        sources = source_problems(plan, offline=request.offline)
        for problem in sources if not request.as_json else ():
            err_console.print(problem.line(), soft_wrap=True, markup=False, highlight=False)
        stopped = doctor.stops(request.force) or unresolved or bool(sources)
        if stopped:  # the real run stops at preflight: none of its steps would run
            why = "stopped by the blocking doctor finding above (--force builds anyway)"
            if doctor.unforceable:
                why = "stopped by the blocking doctor finding above"
            elif not doctor.stops(request.force):
                why = "stopped: the dependencies above do not resolve"
                if not unresolved:
                    why = "stopped: a source above cannot be downloaded"
            rows = [{**row, "action": "stop", "why": why} if row["action"] == "run" else row for row in rows]
        if request.as_json:
            print_json(
                {
                    "dry_run": True,
                    "would_stop": stopped,
                    "doctor": doctor.to_dict(),
                    "resolve": resolution.to_dict() if resolution else None,
                    "sources": [vars(p) for p in sources],
                    "notes": list(plan.notes),
                    "steps": rows,
                }
            )
        else:
            _print_plan(plan, rows)
        # the exit code the real run would have
        doctor.raise_if_blocking(force=request.force, doctor_command=request.doctor_command)
        if resolution is not None and not resolution.ok:
            raise resolution.problem()
        raise_source_problems(sources)
        return None
    plan = make_family_plan(
        request.spec, options, request.variant, request.companions, request.companion_sources
    )
    if doctor.stops(request.force):  # say every preflight problem at once, as the dry run does
        for problem in source_problems(plan, offline=request.offline) if not request.as_json else ():
            err_console.print(problem.line(), soft_wrap=True, markup=False, highlight=False)
    doctor.raise_if_blocking(force=request.force, doctor_command=request.doctor_command)
    resolution = resolve_before_building(
        plan, request.channels, run_tests=options.run_tests, dry_run=False, as_json=request.as_json
    )
    if resolution is not None and not resolution.ok:
        raise resolution.problem()
    raise_source_problems(source_problems(plan, offline=request.offline))
    result, error, report = run_and_report(plan, options.channels)
    report["doctor"] = doctor.to_dict()
    if resolution is not None:
        report["resolve"] = resolution.to_dict()
    paths = write_report(report, plan.work_dir)
    if request.as_json:
        print_json(report)
    else:
        print_summary(report, console, paths, steps_shown=live_table_shown())
    if error is not None:
        raise error
    return result

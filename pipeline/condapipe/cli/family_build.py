"""What `condapipe build <family>` does: preflight, plan, run (resuming), report.

Kept out of the click command so the build command stays argument plumbing, and so tests and
other front ends run exactly the same sequence.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.compile_cache import COMPILE_CACHE_ENV, shared_compile_cache
from condapipe.cli.output import console, err_console, print_json
from condapipe.doctor import DoctorReport, Machine, run_doctor
from condapipe.errors import CondapipeError
from condapipe.plan import (
    Plan,
    PlanFailed,
    PlanOptions,
    PlanResult,
    StepDisplay,
    build_report,
    describe,
    make_family_plan,
    print_summary,
    run_plan,
    write_report,
)
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
    companions: tuple[str, ...] = ()  # --with FAMILY: built against the spec in the same plan


@dataclass(frozen=True)
class Preflight:
    """What doctor found, and what it adds to the build: the toolkit switch and build environment."""

    doctor: DoctorReport
    spec: BuildSpec  # the spec with the toolkit roots doctor found
    env: tuple[tuple[str, str], ...]  # the build environment: compile cache, then MAX_JOBS etc.


def _recipe_takes_compile_cache(package: str) -> bool:
    return COMPILE_CACHE_ENV in (family_data(package).get("passthrough") or ())


def preflight(
    spec: BuildSpec, *, work_dir: Path, engine: str, env: Mapping[str, str] | None = None
) -> Preflight:
    """Doctor for the spec; its build env (MAX_JOBS, ...) and toolkit switch, and the compile cache
    several Pythons share (condapipe.buildspec.compile_cache decides), for the one PlanOptions."""
    report = run_doctor(spec, Machine.from_environ(work_dir), engine=engine)
    merged = dict(env or {})
    for key, value in report.build_env:
        merged.setdefault(key, value)
    if COMPILE_CACHE_ENV not in merged:
        shared = shared_compile_cache(
            environ=os.environ,
            pythons=len(spec.pythons),
            work_dir=work_dir,
            recipe_passes_it=_recipe_takes_compile_cache(spec.package),
            ccache_found=shutil.which("ccache") is not None,
        )
        merged.update(shared.env if shared else ())
    return Preflight(report, spec.with_toolkit_roots(dict(report.cuda_homes)), tuple(sorted(merged.items())))


def _print_plan(plan: Plan, rows: list[dict[str, Any]]) -> None:
    lines = [f"plan: {len(rows)} steps, channel {plan.output_dir}, work dir {plan.work_dir}"]
    for row in rows:
        mark = {"run": "run ", "stop": "stop"}.get(row["action"], "skip")
        lines.append(f"  {mark} {row['id']}: {row['title']} — {row['why']}")
        for key, value in row["inputs"].items():
            text = value if isinstance(value, str) else str(value)
            lines.append(f"         {key}: {text[:100]}")
    lines += [f"  note: {note}" for note in plan.notes]
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
        plan = make_family_plan(request.spec, options, request.variant, request.companions)
        rows = describe(plan)
        stopped = bool(doctor.blocking) and not request.force
        if stopped:  # the real run stops at preflight: none of its steps would run
            why = "would not run: the blocking doctor finding above stops the build first (--force: build)"
            rows = [{**row, "action": "stop", "why": why} if row["action"] == "run" else row for row in rows]
        if request.as_json:
            print_json(
                {
                    "dry_run": True,
                    "would_stop": stopped,
                    "doctor": doctor.to_dict(),
                    "notes": list(plan.notes),
                    "steps": rows,
                }
            )
        else:
            _print_plan(plan, rows)
        doctor.raise_if_blocking(force=request.force)  # the exit code the real run would have
        return None
    doctor.raise_if_blocking(force=request.force)
    plan = make_family_plan(request.spec, options, request.variant, request.companions)
    result, error, report = run_and_report(plan)
    report["doctor"] = doctor.to_dict()
    paths = write_report(report, plan.work_dir)
    if request.as_json:
        print_json(report)
    else:
        print_summary(report, console, paths)
    if error is not None:
        raise error
    return result


def run_and_report(plan: Plan) -> tuple[PlanResult | None, CondapipeError | None, dict[str, Any]]:
    """Run `plan` with the live step display; the result, the error that stopped it, the report.

    Shared by `build PACKAGE` and `build RECIPE_DIR`, which run the same steps."""
    result: PlanResult | None = None
    error: CondapipeError | None = None
    try:
        with StepDisplay(plan, err_console) as display:
            result = run_plan(plan, display=display)
    except PlanFailed as exc:
        result, error = exc.result, exc.cause
    return result, error, build_report(plan, result, error=str(error) if error else None)

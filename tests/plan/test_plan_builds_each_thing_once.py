"""Planning a build makes each thing once and passes it down.

The recipe model of a job is built when the plan is made and carried by the job: the verify step's
allowlist, the resolve step (py-rattler-build renders the same model) and the render step all read
that one (before, the model was built three times per job). A machine's nvcc is asked its version
once per process, however many times choosing --cuda and doctor ask for the toolkits.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from condapipe.buildspec.settings import spec_from_flags
from condapipe.doctor import Machine, find_toolkits, run_doctor
from condapipe.plan.build_plan import make_family_plan
from condapipe.plan.environments import render_job
from condapipe.plan.jobs import PlanOptions
from condapipe.plan.runner import StepContext, StepLog
from condapipe.render.families import family_for

STANDINS = Path(__file__).parent.parent / "standins" / "doctor"


def test_the_recipe_model_is_built_once_per_job_of_a_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = family_for("cuda-smoke")
    built: list[object] = []
    original = builder.build_model
    monkeypatch.setattr(builder, "build_model", lambda spec: built.append(spec) or original(spec))
    spec = spec_from_flags("cuda-smoke", {"cuda": ("12.4", "13.0"), "arch": "8.0"})
    plan = make_family_plan(spec, PlanOptions(output_dir=tmp_path / "channel", work_dir=tmp_path / "work"))
    jobs = [job for job in plan.jobs if job.spec is not None]
    assert len(jobs) == 2 and len(built) == 2  # one model per job, made with the plan
    for job in jobs:
        facts = render_job(job, "linux-64", True)  # the resolve step's environments
        assert [(f.job, f.package) for f in facts] == [(job.label, "cuda-smoke")]
    for step in (s for s in plan.steps if s.kind == "render"):
        step_dir = tmp_path / "steps" / step.id.replace(":", "-")
        step_dir.mkdir(parents=True)
        ctx = StepContext(step, tmp_path / "work", step_dir, StepLog(step_dir / "log"), {})
        outcome = step.action(ctx)
        assert (Path(str(outcome.data["recipe_dir"])) / "recipe.yaml").is_file()
    assert len(built) == 2  # nothing built it again


def _counting_nvcc(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in nvcc 11.0 on PATH that notes each time it is asked its version."""
    bindir, calls = tmp_path / "bin", tmp_path / "nvcc-calls"
    bindir.mkdir()
    real = STANDINS / "nvcc-11.0" / "nvcc"
    script = bindir / "nvcc"
    script.write_text(f'#!/usr/bin/env bash\necho asked >> "{calls}"\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    return bindir, calls


def test_a_machine_toolkit_is_probed_once_for_the_cuda_default_and_doctor(tmp_path: Path) -> None:
    bindir, calls = _counting_nvcc(tmp_path)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "CONDAPIPE_CUDA_ROOTS": str(tmp_path / "none")}
    machine = Machine.from_environ(tmp_path / "work", env)
    assert [t.cuda for t in find_toolkits(machine)] == ["11.0"]  # what --cuda defaults to
    spec = spec_from_flags("cuda-smoke", {"cuda": ("11.0",), "arch": "7.0"})
    report = run_doctor(spec, Machine.from_environ(tmp_path / "work", env))
    assert any(f.check == "nvcc" and f.level == "ok" for f in report.findings)
    assert find_toolkits(machine)  # asked again: answered from what nvcc said
    assert calls.read_text().splitlines() == ["asked"]
    # a replaced nvcc is asked again
    (bindir / "nvcc").write_text((bindir / "nvcc").read_text() + "# replaced\n")
    assert [t.cuda for t in find_toolkits(machine)] == ["11.0"]
    assert calls.read_text().splitlines() == ["asked", "asked"]

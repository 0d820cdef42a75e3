"""`condapipe build pytorch|magma|cuda-smoke --dry-run`: one plan shape for every family.

A dry run shows the plan the real command would run (doctor's findings included) without
building, downloading or writing anything, so these run in a second each.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from condapipe.buildspec.settings import spec_from_flags
from condapipe.cli.family_build import preflight
from condapipe.cli.main import main
from condapipe.plan.build_plan import PlanOptions, family_jobs
from condapipe.plan.steps import build_env

KINDS = ["render", "build", "fix", "verify", "test", "publish"]
STANDIN_NVCC = Path(__file__).parent.parent / "standins" / "doctor" / "nvcc-11.0" / "nvcc"


def dry_run(tmp_path: Path, *args: str) -> dict:
    result = CliRunner().invoke(
        main,
        [
            "build",
            *args,
            "--dry-run",
            "--json",
            "--output-dir",
            str(tmp_path / "ch"),
            "--work-dir",
            str(tmp_path / "w"),
        ],
    )
    plan = json.loads(result.stdout)
    # A dry run exits as the real run would: 3 when a blocking doctor finding would stop it, or
    # when its dependencies do not resolve (no channel here has cmake: resolve first says so).
    stops = not plan["doctor"]["ok"] or not plan["resolve"]["ok"]
    assert result.exit_code == (3 if stops else 0), result.stderr
    assert plan["would_stop"] == stops
    return plan


def test_pytorch_plans_magma_then_one_chain_per_python_and_cuda(tmp_path: Path) -> None:
    plan = dry_run(
        tmp_path, "pytorch", "--version", "2.9.0", "--cuda", "12.8", "--cuda", "13.0", "--python", "3.12"
    )
    plan_py = dry_run(
        tmp_path, "pytorch", "--version", "2.9.0", "--cuda", "13.0", "--python", "3.11", "--python", "3.12"
    )
    packages = list(dict.fromkeys(s["id"].split(":", 1)[1] for s in plan["steps"]))
    assert packages[:2] == ["magma-cuda128-2.6.1", "magma-cuda130-2.6.1"]
    assert packages[2:] == ["pytorch-2.9.0-py3.12-cuda12.8", "pytorch-2.9.0-py3.12-cuda13.0"]
    per_python = list(dict.fromkeys(s["id"].split(":", 1)[1] for s in plan_py["steps"]))
    assert per_python == [
        "magma-cuda130-2.6.1",
        "pytorch-2.9.0-py3.11-cuda13.0",
        "pytorch-2.9.0-py3.12-cuda13.0",
    ]
    build = next(s for s in plan_py["steps"] if s["id"] == "build:pytorch-2.9.0-py3.12-cuda13.0")
    assert build["needs"] == ["render:pytorch-2.9.0-py3.12-cuda13.0", "publish:magma-cuda130-2.6.1"]


def test_a_cpu_pytorch_needs_no_magma(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, "pytorch", "--version", "2.9.0", "--cuda", "cpu", "--python", "3.12")
    assert [s["kind"] for s in plan["steps"]] == KINDS
    assert plan["steps"][0]["id"] == "render:pytorch-2.9.0-py3.12-cpu"


def test_a_jetson_pytorch_has_no_magma_to_build(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, "pytorch", "--version", "2.5.0", "--jetson", "orin", "--python", "3.10")
    assert [s["kind"] for s in plan["steps"]] == KINDS
    assert not [s for s in plan["steps"] if "magma" in s["id"]]


def test_magma_and_cuda_smoke_use_the_same_steps(tmp_path: Path) -> None:
    magma = dry_run(tmp_path, "magma", "--cuda", "13.0")
    smoke = dry_run(tmp_path, "cuda-smoke", "--cuda", "13.0", "--arch", "9.0")
    assert [s["kind"] for s in magma["steps"]] == [s["kind"] for s in smoke["steps"]] == KINDS
    verify = next(s for s in magma["steps"] if s["kind"] == "verify")
    assert verify["inputs"]["archs"] == "8.0;8.6;9.0;10.0;12.0"  # magma's arch list from cuda.yaml


def test_a_dry_run_reports_blocking_doctor_findings_marks_steps_stop_and_exits_3(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, "pytorch", "--version", "1.8.0", "--cuda", "11.1", "--python", "3.8")
    assert plan["doctor"]["ok"] is False and plan["would_stop"] is True
    assert {f["check"] for f in plan["doctor"]["findings"] if f["level"] == "block"} >= {"gcc", "cudnn"}
    assert {s["action"] for s in plan["steps"]} == {"stop"}
    assert all("doctor finding" in s["why"] for s in plan["steps"])
    assert not (tmp_path / "w").exists() and not (tmp_path / "ch").exists()


def test_a_toolkit_doctor_found_under_usr_local_is_put_first_on_the_builds_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toolkit = tmp_path / "cuda-11.0"
    (toolkit / "bin").mkdir(parents=True)
    shutil.copy(STANDIN_NVCC, toolkit / "bin" / "nvcc")
    monkeypatch.setenv("CONDAPIPE_CUDA_ROOTS", str(tmp_path))
    spec = spec_from_flags("cuda-smoke", {"cuda": ("11.0",), "arch": "8.0"})
    checked = preflight(spec, work_dir=tmp_path / "w", engine="auto", environ=os.environ)
    assert [v.toolkit_root for v in checked.spec.cuda_variants] == [str(toolkit)]
    options = PlanOptions(output_dir=tmp_path / "ch", work_dir=tmp_path / "w", env=checked.env)
    (job,) = family_jobs(checked.spec)
    env = build_env(job, options)
    assert env["CUDA_HOME"] == str(toolkit) and env["PATH"].startswith(f"{toolkit}/bin:")
    assert env["MAX_JOBS"].isdigit()


@pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache")
def test_several_pythons_and_the_long_builds_keep_a_compile_cache_in_the_work_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONDAPIPE_COMPILE_CACHE", raising=False)
    work = tmp_path / "w"
    two = spec_from_flags("pytorch", {"version": "2.4.1", "cuda": ("cpu",), "python": ("3.10", "3.11")})
    chosen = preflight(two, work_dir=work, engine="auto", environ=os.environ)
    assert dict(chosen.env)["CONDAPIPE_COMPILE_CACHE"] == str((tmp_path / "w" / "compile-cache").resolve())

    # One Python of a family whose build is hours of compiling: the cache is kept all the same, so an
    # interrupted build continues on the rerun (issue 34).
    one = spec_from_flags("pytorch", {"version": "2.4.1", "cuda": ("cpu",), "python": ("3.10",)})
    chosen = preflight(one, work_dir=work, engine="auto", environ=os.environ)
    assert dict(chosen.env)["CONDAPIPE_COMPILE_CACHE"] == str((tmp_path / "w" / "compile-cache").resolve())
    magma = spec_from_flags("magma", {"cuda": ("13.0",), "arch": "9.0"})
    chosen = preflight(magma, work_dir=work, engine="auto", environ=os.environ)
    assert dict(chosen.env)["CONDAPIPE_COMPILE_CACHE"] == str((tmp_path / "w" / "compile-cache").resolve())
    # A family whose build script takes no cache gets none.
    smoke = spec_from_flags("cuda-smoke", {"cuda": ("13.0",), "arch": "9.0"})
    chosen = preflight(smoke, work_dir=work, engine="auto", environ=os.environ)
    assert "CONDAPIPE_COMPILE_CACHE" not in dict(chosen.env)

    monkeypatch.setenv("CONDAPIPE_COMPILE_CACHE", str(tmp_path / "mine"))
    chosen = preflight(two, work_dir=work, engine="auto", environ=os.environ)
    assert "CONDAPIPE_COMPILE_CACHE" not in dict(chosen.env)  # the user's own cache reaches the build as is

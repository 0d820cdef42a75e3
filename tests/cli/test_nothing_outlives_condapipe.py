"""Nothing of a build outlives condapipe unnoticed (issue 34, item 1).

A user's `kill -9` of condapipe (or a crash, the out-of-memory killer, a lost SSH session) runs no
handler of condapipe's; the build's processes (the engine, its build script, ninja, gcc's cc1 in
process groups of their own) still end by themselves, within seconds. A rerun in the same work dir
never builds on top of a running build: while the first condapipe runs it refuses in one line
naming its PID and how to stop it; once that condapipe is gone it stops whatever of its build
still runs (also when nothing else did), says so in one line, and builds.

Each case builds a real recipe whose ninja compiles two C files, each held inside its compile by
a FIFO the test opens when it chooses (tests/build_processes.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from build_processes import (
    SETTLE_S,
    alive,
    build_argv,
    compile_recipe,
    compiling,
    in_session,
    kill_session,
    open_gates,
    wait_for,
    watcher_of,
)

pytestmark = pytest.mark.slow


def _start(project: Path, recipe: Path, engine: str = "rattler-build") -> subprocess.Popen[str]:
    return subprocess.Popen(
        build_argv(recipe, engine),
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _rerun(project: Path, recipe: Path, engine: str = "rattler-build") -> subprocess.CompletedProcess[str]:
    argv = build_argv(recipe, engine)
    return subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=600)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.mark.parametrize("engine", ["rattler-build", "conda-build"])
def test_kill_9_of_condapipe_ends_the_engine_ninja_and_the_compilers_by_themselves(
    tmp_path: Path, project: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    if engine == "conda-build":
        request.getfixturevalue("real_conda")  # skips, naming how to get it, without conda-build
    recipe, gates = compile_recipe(tmp_path, engine)
    proc = _start(project, recipe, engine)
    session = 0
    try:
        session, cc1 = compiling(proc.pid)
        build = in_session(session)
        assert len(build) >= 5  # the engine, bash, ninja, and per compile gcc and cc1
        watcher = watcher_of(proc.pid)
        assert watcher is not None

        proc.kill()  # kill -9: no handler of condapipe's runs
        proc.communicate(timeout=60)
        # Seconds on an idle machine; the ceiling is what still proves it ends by itself.
        took = wait_for("the build outlived condapipe", lambda: not in_session(session), 60)
        print(f"build processes gone {took:.2f}s after kill -9 of condapipe")
        assert not any(alive(pid) for pid in [*build, *cc1])
        wait_for("the watcher outlived the build", lambda: not alive(watcher), 30)
    finally:
        open_gates(gates)
        if session:
            kill_session(session)
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    rerun = _rerun(project, recipe, engine)  # nothing to stop: the rerun just builds
    assert rerun.returncode == 0, rerun.stderr
    assert "earlier build" not in rerun.stderr
    assert [p.name for p in project.glob("channel/*/compiling-1.0-*")]


def test_a_rerun_while_the_build_runs_refuses_in_one_line_naming_its_pid(
    tmp_path: Path, project: Path
) -> None:
    recipe, gates = compile_recipe(tmp_path)
    proc = _start(project, recipe)
    session = 0
    try:
        session, cc1 = compiling(proc.pid)
        second = _rerun(project, recipe)
        assert second.returncode == 3, second.stderr
        lines = second.stderr.strip().splitlines()
        assert f"another condapipe build (pid {proc.pid}) is running in" in lines[-1]
        assert f"kill {proc.pid}" in lines[-1]
        assert all(alive(pid) for pid in cc1)  # the refusal touched nothing of the running build

        open_gates(gates, readers_s=SETTLE_S)  # both compiles are alive, at (or on their way to) their gates
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    finally:
        open_gates(gates)
        if session:
            kill_session(session)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_rerun_stops_a_build_whose_condapipe_and_watcher_were_killed_then_builds(
    tmp_path: Path, project: Path
) -> None:
    recipe, gates = compile_recipe(tmp_path)
    proc = _start(project, recipe)
    session = 0
    try:
        session, cc1 = compiling(proc.pid)
        build = in_session(session)
        watcher = watcher_of(proc.pid)
        assert watcher is not None
        # Both gone at once (`kill -9` of everything of the user's but the build, the OOM killer):
        # nothing of condapipe's is left to stop the build, which goes on compiling.
        os.kill(watcher, signal.SIGKILL)
        proc.kill()
        proc.communicate(timeout=60)
        wait_for("the watcher survived SIGKILL", lambda: not alive(watcher), 30)
        time.sleep(1)  # what the watcher would have needed to stop the build
        assert all(alive(pid) for pid in cc1), "the test needs the build still compiling"

        # The FIFOs are now plain files: the rerun's own compile goes straight through, and only
        # the orphaned cc1 (still blocked on the old FIFOs) wait.
        for name, gate in gates.items():
            gate.unlink()
            gate.write_text(f"static int gated_{name}(void) {{ return 1; }}\n")
        rerun = _rerun(project, recipe)
    finally:
        with contextlib.suppress(OSError):
            open_gates(gates)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        assert rerun.returncode == 0, rerun.stderr
        notes = [line for line in rerun.stderr.splitlines() if "earlier build" in line]
        assert len(notes) == 1, rerun.stderr
        assert f"outlived its condapipe (pid {proc.pid})" in notes[0]
        assert not any(alive(pid) for pid in [*build, *cc1])
        assert [p.name for p in project.glob("channel/*/compiling-1.0-*.conda")]
    finally:
        kill_session(session)

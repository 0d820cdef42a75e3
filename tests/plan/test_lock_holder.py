"""The work dir's holder record: what a killed condapipe's build left running is stopped by the next
run, and a PID that names another process since is left alone (issue 34, item 1).

Real processes stand in for a build's session: `sleep` started in a session of its own, as the
engines start theirs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from condapipe import build_session
from condapipe.errors import EnvironmentProblem
from condapipe.plan.lock_holder import HOLDER_FILE, read_holder
from condapipe.plan.state import work_dir_lock


@pytest.fixture
def orphan() -> Iterator[subprocess.Popen[bytes]]:
    """A 'build' still running in a session of its own, as one a killed condapipe left."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    proc.wait()


def _record(work: Path, session: int, start: int, *, pid: int = 2**22 + 1) -> None:
    """A holder file as a killed condapipe (a PID no process has) leaves it."""
    work.mkdir(parents=True, exist_ok=True)
    doc = {"pid": pid, "start": 1, "boot": build_session.boot_id(), "sessions": {str(session): start}}
    (work / HOLDER_FILE).write_text(json.dumps(doc))


def _ended(proc: subprocess.Popen[bytes]) -> bool:
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_the_next_run_stops_the_build_a_killed_condapipe_left_and_says_so(
    tmp_path: Path, orphan: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    start = build_session.start_time(orphan.pid)
    assert start is not None
    _record(work, orphan.pid, start)
    said: list[str] = []
    with work_dir_lock(work, said.append):
        assert _ended(orphan), "the leftover build was not stopped"
        assert orphan.returncode == -signal.SIGTERM
        holder = read_holder(work)  # now naming this run, with no build running yet
        assert holder is not None and holder.is_alive() and holder.sessions == {}
    assert capsys.readouterr().err == ""  # the plan prints nothing: the CLI says the line it is given
    assert len(said) == 1 and "stopped 1 processes of an earlier build" in said[0]
    assert f"outlived its condapipe (pid {2**22 + 1})" in said[0]
    assert not (work / HOLDER_FILE).exists()  # a run that ended as it should leaves nothing to stop


def test_a_recorded_pid_that_names_another_process_now_is_left_alone(
    tmp_path: Path, orphan: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    start = build_session.start_time(orphan.pid)
    assert start is not None
    _record(work, orphan.pid, start - 1)  # the recorded leader started earlier: not this process
    said: list[str] = []
    with work_dir_lock(work, said.append):
        pass
    assert orphan.poll() is None
    assert said == [] and capsys.readouterr().err == ""


def test_a_record_from_before_a_reboot_names_nothing(tmp_path: Path, orphan: subprocess.Popen[bytes]) -> None:
    work = tmp_path / "work"
    start = build_session.start_time(orphan.pid)
    assert start is not None
    _record(work, orphan.pid, start)
    doc = json.loads((work / HOLDER_FILE).read_text())
    (work / HOLDER_FILE).write_text(json.dumps({**doc, "boot": "another-boot"}))
    with work_dir_lock(work):
        pass
    assert orphan.poll() is None


@pytest.mark.parametrize("text", ["", "{", "[]", '{"pid": "x"}', "{" * 5000 + "}" * 5000])
def test_an_unreadable_record_is_ignored(tmp_path: Path, text: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / HOLDER_FILE).write_text(text)
    with work_dir_lock(work):
        assert read_holder(work) is not None  # this run's own record replaced it


def test_a_second_run_is_refused_naming_the_running_condapipe(tmp_path: Path) -> None:
    work = tmp_path / "work"
    with work_dir_lock(work), pytest.raises(EnvironmentProblem) as refused, work_dir_lock(work):
        pass
    assert f"another condapipe build (pid {os.getpid()}) is running in {work}" in str(refused.value)
    assert f"stop it with `kill {os.getpid()}`" in str(refused.value)

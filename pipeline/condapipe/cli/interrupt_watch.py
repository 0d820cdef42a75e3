"""The watcher process of condapipe.cli.interrupt: stops a build's processes the moment a signal
comes, and every process of the build when condapipe itself is killed.

Run as `python -I -S interrupt_watch.py PID FD` with the read end of PID's signal wakeup pipe as
stdin and the read end of its control pipe as FD (it imports nothing of condapipe and starts in
milliseconds). py-rattler holds the GIL for as long as a call into it lasts, so no thread of
condapipe may run then; this process does. On each SIGINT, SIGTERM or SIGHUP byte it sends SIGTERM
to every process below PID (the engine's process, the build script, make, nvcc) and of each build
session it was told of, except itself; the engine then returns with an error the CLI reports as
the interruption.

The control pipe carries `start SESSION TICKS` and `end SESSION TICKS` as each build session (see
condapipe.build_session) starts and ends, and `done` when condapipe ends as it should. End-of-file
without `done` means condapipe died (SIGKILL, the out-of-memory killer, a crash): no handler of its
ran, its children went to init, and nobody would ever stop them; so this process stops every
process of the sessions still live (SIGTERM, SIGKILL after a grace), then ends.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from pathlib import Path

_STOP = {int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGHUP)}
# How long the build's processes get to end on SIGTERM once condapipe is gone (ninja stops its
# compile commands, a compiler removes its temporary files) before SIGKILL.
_GRACE_S = 3.0


def children(pid: int) -> list[int]:
    """Direct children of `pid`, from every thread's /proc children list (Linux)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, parents before their children."""
    order: list[int] = []
    todo = [pid]
    while todo:
        for child in children(todo.pop()):
            if child not in order:
                order.append(child)
                todo.append(child)
    return order


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, session, start ticks) of a live process, None once it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else (fields[0], int(fields[3]), int(fields[19]))


def session_members(session: int, since: int) -> list[int]:
    """The live processes of `session` started at or after tick `since` (the build's, not those of
    a later session that reused the number once every process of the build had ended)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat and stat[1] == session and stat[2] >= since:
                found.append(int(entry.name))
    return found


def _send(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def stop_below(pid: int, spare: int, sessions: dict[int, int]) -> None:
    targets = descendants(pid)
    for session, since in sessions.items():
        targets += session_members(session, since)
    for child in dict.fromkeys(targets):
        if child != spare:
            _send(child, signal.SIGTERM)


def stop_sessions(sessions: dict[int, int], spare: int) -> None:
    """SIGTERM and SIGCONT to every process of `sessions`, SIGKILL to what is left after the grace."""
    for session, since in sessions.items():
        for member in session_members(session, since):
            if member != spare:
                _send(member, signal.SIGTERM)
                _send(member, signal.SIGCONT)
    deadline = time.monotonic() + _GRACE_S
    while True:
        left = [m for s, t in sessions.items() for m in session_members(s, t) if m != spare]
        if not left:
            return
        if time.monotonic() >= deadline:
            for member in left:
                _send(member, signal.SIGKILL)
        time.sleep(0.05)


def _control(line: str, sessions: dict[int, int]) -> bool:
    """Apply one control line; True once condapipe said it is done."""
    words = line.split()
    if words == ["done"]:
        return True
    if len(words) == 3 and words[1].isdigit() and words[2].isdigit():
        if words[0] == "start":
            sessions[int(words[1])] = int(words[2])
        elif words[0] == "end":
            sessions.pop(int(words[1]), None)
    return False


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches this process too
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # and its hang-up
    # and a SIGTERM to the whole process group (`kill -- -PGID`): this process must outlive it to
    # read the signal condapipe forwards; it ends when condapipe closes the pipe
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = int(argv[1])
    control = int(argv[2]) if len(argv) > 2 else -1
    sessions: dict[int, int] = {}
    done = False
    pending = b""
    fds = [0] if control < 0 else [0, control]
    while fds:
        try:
            ready, _, _ = select.select(fds, [], [])
        except InterruptedError:
            continue
        if control in ready:
            data = os.read(control, 4096)
            if not data:  # condapipe is gone: as it should (after "done") or killed
                if not done:
                    stop_sessions(sessions, os.getpid())
                return 0
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                done = _control(line.decode("ascii", "replace"), sessions) or done
        if 0 in ready:
            try:
                data = os.read(0, 64)
            except OSError:
                data = b""
            if not data:  # the wakeup pipe closed; the control pipe (if any) says how it ended
                fds.remove(0)
            elif _STOP.intersection(data):
                stop_below(parent, os.getpid(), sessions)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

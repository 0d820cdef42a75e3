"""The watcher process of condapipe.cli.interrupt: stops a build's processes the moment a signal comes.

Run as `python -I -S interrupt_watch.py PID` with the read end of PID's signal wakeup pipe as stdin
(it imports nothing of condapipe and starts in milliseconds). py-rattler holds the GIL for as long
as a call into it lasts, so no thread of condapipe may run then; this process does. On each SIGINT,
SIGTERM or SIGHUP byte it sends SIGTERM to every process below PID (the engine's process, the build
script, make, nvcc) except itself; the engine then returns with an error the CLI reports as the
interruption. It ends when PID closes the pipe (the command is over, however it ended).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

_STOP = {int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGHUP)}


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


def stop_below(pid: int, spare: int) -> None:
    for child in descendants(pid):
        if child != spare:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGTERM)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches this process too
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # and its hang-up
    # and a SIGTERM to the whole process group (`kill -- -PGID`): this process must outlive it to
    # read the signal condapipe forwards; it ends when condapipe closes the pipe
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = int(argv[1])
    while True:
        try:
            data = os.read(0, 64)
        except InterruptedError:
            continue
        except OSError:
            return 0
        if not data:
            return 0
        if _STOP.intersection(data):
            stop_below(parent, os.getpid())


if __name__ == "__main__":
    sys.exit(main(sys.argv))

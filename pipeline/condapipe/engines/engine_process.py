"""Run an engine in a process of its own and follow it: the condapipe side of rattler_build_child.

An engine that runs inside condapipe leaves condapipe holding what it used (GiBs after packing a
large package, kept by the allocator for the fix and publish steps that follow) and goes down
with it when its native code crashes. So the engine
runs in a fresh interpreter, in a process group of its own (stopping the group stops the build
script with it, even once the engine itself is gone), and condapipe only reads its messages.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from condapipe import build_session

# The protocol with condapipe.engines.rattler_build_child: one message per line, MARK then JSON.
MARK = "\x1econdapipe-engine:"
# Messages: {"event": "started", "version"}, {"event": "log", "text", "style"}, then one of
# {"event": "usage", "message"} (the recipe cannot be read), {"event": "failed", "message"}
# (rattler-build's error), {"event": "built", "packages": [paths]} or {"event": "error", "message"}
# (anything else went wrong in this process).
ENDINGS = ("usage", "failed", "built", "error")

# A line longer than this is handed on in pieces (native code printing without newlines).
_MAX_LINE = 1 << 20
# Reads of what is left in the pipe once the engine exited (a background writer cannot hold us).
_DRAIN_READS = 1024


@dataclass
class Ending:
    """How the engine's process ended: its last message (if it sent one) and its exit status."""

    event: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    returncode: int = 0

    @property
    def stopped(self) -> bool:
        """True when the process ended by a stop request (SIGINT, SIGTERM, SIGHUP: an interrupted
        build), not by a crash whose scratch folder is kept for debugging."""
        return -self.returncode in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def died_how(self) -> str | None:
        """`was killed by SIGKILL (out of memory?)`, `exited with status 1`, `ended without a result`,
        or None when it ended as it should: with an ending message, after which it exits 0 (or 1
        after an "error" message, which says what went wrong)."""
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            hint = " (out of memory?)" if -self.returncode == signal.SIGKILL else ""
            return f"was killed by {name}{hint}"
        if self.returncode > 0 and self.event != "error":
            return f"exited with status {self.returncode}"
        if self.event is None:
            return "ended without a result"
        return None


def _argv(module: str) -> list[str]:
    # The same interpreter and import path as condapipe's; -P (3.11+): the current folder is not
    # searched for modules, so a file in the user's project cannot shadow one the engine imports.
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe, "-m", module]


def _message(line: str) -> tuple[str, dict[str, Any] | None]:
    """(text printed before the message, the message) of one line; (line, None) for plain output."""
    before, mark, payload = line.partition(MARK)
    if not mark:
        return line, None
    try:
        data = json.loads(payload)
    except ValueError:
        return line, None
    if not isinstance(data, dict) or not isinstance(data.get("event"), str):
        return line, None
    return before, data


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop every process of the engine's session (the engine, its build script, ninja, the
    compilers in their own process groups): SIGTERM and SIGCONT (a build paused by Ctrl-Z acts on
    nothing until it runs again), SIGKILL after a grace; then reap the engine."""
    build_session.stop(proc.pid, build_session.STOP_GRACE_S)
    proc.wait()


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """True once the engine exited, without reaping it: while its zombie stays, its PID (the
    session's id) cannot name another process, so what is left of its session is the build's."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _exit_status(proc: subprocess.Popen[bytes]) -> int:
    """The engine's exit status as Popen.returncode gives it, once it exited, without reaping it."""
    info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    assert info is not None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def run(
    module: str,
    request: dict[str, Any],
    env: dict[str, str],
    on_message: Callable[[dict[str, Any]], None],
    on_output: Callable[[str], None],
) -> Ending:
    """Run `python -m module` with `request` on its stdin and `env` as its environment.

    Each message that is no ending goes to `on_message` and each other line to `on_output`, as they
    come. Returns once the process has exited. Whatever stops this early (Ctrl-C's
    KeyboardInterrupt, an error in a callback) stops the engine's process group first. After a
    crash, what the engine left running in its group is stopped too.
    """
    proc = subprocess.Popen(
        _argv(module),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,  # exactly the build's: nothing of condapipe's own (PYTHONPATH) leaks into it
        start_new_session=True,  # its own session: no terminal to stop it on a read; see build_session
    )
    ending = Ending()
    try:
        with build_session.supervised(proc.pid):  # the watcher knows it until it is over
            try:
                assert proc.stdin is not None and proc.stdout is not None
                with contextlib.suppress(BrokenPipeError), proc.stdin:  # a dead engine shows in its ending
                    proc.stdin.write(json.dumps(request).encode())
                _follow(proc, ending, on_message, on_output)
                ending.returncode = _exit_status(proc)
                if ending.died_how() is not None:  # the build script of a crashed engine must not go on
                    build_session.stop(proc.pid, build_session.STOP_GRACE_S)
            except BaseException:
                stop_group(proc)
                raise
        proc.wait()
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    return ending


def _follow(
    proc: subprocess.Popen[bytes],
    ending: Ending,
    on_message: Callable[[dict[str, Any]], None],
    on_output: Callable[[str], None],
) -> None:
    """Hand each line of the engine's output on as it comes; keep its ending message."""
    for line in _lines(proc):
        before, data = _message(line)
        if before or data is None:
            on_output(before)
        if data is None:
            continue
        if data["event"] in ENDINGS and ending.event is None:
            ending.event, ending.fields = data["event"], data
        elif data["event"] not in ENDINGS:
            on_message(data)


def _split(pending: bytes) -> tuple[list[bytes], bytes]:
    """Whole lines (at most _MAX_LINE bytes each) off the front of `pending`, and the rest."""
    lines = []
    while True:
        cut = pending.find(b"\n", 0, _MAX_LINE + 1)
        if cut >= 0:
            lines.append(pending[:cut])
            pending = pending[cut + 1 :]
        elif len(pending) > _MAX_LINE:
            lines.append(pending[:_MAX_LINE])
            pending = pending[_MAX_LINE:]
        else:
            return lines, pending


def _lines(proc: subprocess.Popen[bytes]) -> Iterator[str]:
    """The process's output, line by line, until it has exited and what it wrote is read.

    Not read to end-of-file: a program the build script started in the background (a compiler
    cache's server) may hold the pipe open long after the engine exited.
    """
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    pending = b""
    for_drain = _DRAIN_READS
    while for_drain > 0:
        exited = _exited(proc)
        ready, _, _ = select.select([fd], [], [], 0 if exited else 0.5)
        if not ready:
            if exited:
                break
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:  # end of file: every writer is gone
            break
        if exited:
            for_drain -= 1
        lines, pending = _split(pending + chunk)
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if pending:
        yield pending.decode("utf-8", errors="replace")

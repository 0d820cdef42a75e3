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
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

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
_STOP_GRACE_S = 10.0


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
    """SIGTERM to the engine's process group (the engine and its build script), SIGKILL after a grace.

    SIGCONT follows the SIGTERM: a group paused by Ctrl-Z acts on nothing until it runs again.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
        os.killpg(proc.pid, signal.SIGCONT)
    try:
        proc.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def _stops_with_us(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """Ctrl-Z (SIGTSTP) pauses the engine's process group with condapipe, and `fg` resumes both.

    The engine's group has no terminal (its own session), so the terminal's SIGTSTP reaches only
    condapipe; left alone, the compile would go on in the background while the shell says
    "Stopped". A group in another session is orphaned and the kernel drops SIGTSTP sent to it, so
    the group gets SIGSTOP; condapipe then stops itself the same way (also when nothing does job
    control for it) and, once continued, continues the group.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTSTP) == signal.SIG_IGN  # whoever started us wants no stops
    ):
        yield
        return

    def pause(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGSTOP)
        try:
            os.kill(os.getpid(), signal.SIGSTOP)  # returns once something sends SIGCONT
        finally:  # also when the signal that woke us (a hang-up, SIGTERM) raises here
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGCONT)

    before = signal.signal(signal.SIGTSTP, pause)
    try:
        yield
    finally:
        signal.signal(signal.SIGTSTP, before)


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
        start_new_session=True,  # its own process group, and no terminal to stop it on a read
    )
    ending = Ending()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(BrokenPipeError), proc.stdin:  # a dead engine shows in its ending
            proc.stdin.write(json.dumps(request).encode())
        with _stops_with_us(proc):
            _follow(proc, ending, on_message, on_output)
        ending.returncode = proc.wait()
    except BaseException:
        stop_group(proc)
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    if ending.died_how() is not None:
        stop_group(proc)  # the build script of an engine that crashed must not keep running
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
        exited = proc.poll() is not None
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

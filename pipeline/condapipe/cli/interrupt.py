"""Ctrl-C, SIGTERM and a hang-up: stop the build now, say so in one line, exit 130; a rerun resumes.

Why this is more than Python's KeyboardInterrupt: the engines run the build script as child
processes (conda-build's own; py-rattler-build's inside the engine's process, which runs its build
in Rust holding the GIL and ignores SIGINT: condapipe.engines.engine_process stops its process
group when the KeyboardInterrupt reaches condapipe), and py-rattler calls made inside condapipe
(resolving, the plan's test step) hold the GIL too, so Python's handler may not run until they
return. So the C-level handler also writes each signal to a wakeup pipe whose other end a small
watcher process reads (condapipe.cli.interrupt_watch): it sends SIGTERM to every process below
condapipe at once, the engine returns with an error, and the CLI reports it as the interruption it
is. Lines the engine prints after that ("Script failed to execute", its retry hints) are dropped:
they describe the interruption, not a failure.

SIGHUP is one of them: a terminal that closes on a build paused with Ctrl-Z sends the job SIGHUP
and SIGCONT, and by default condapipe would die at once, leaving the engine's process group (a
session of its own, which no hang-up reaches) stopped for good.

Every write condapipe makes is a temporary name then a rename, and the plan state records a step
only once it finished, so whatever the signal interrupts, nothing half-written remains.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for Ctrl-C
MESSAGE = "interrupted — rerun the same command to resume"  # commands that resume (build)
PLAIN_MESSAGE = "interrupted"  # the others: nothing to resume, nothing half-written
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_WATCHER = Path(__file__).with_name("interrupt_watch.py")
# Python packages whose native code calls back into Python (progress events, log callbacks): a
# KeyboardInterrupt raised inside such a call is caught and printed by them ("Error in Python
# progress callback"), so there the handler only records the signal; the watcher stops the build.
_NATIVE_PACKAGES = ("rattler_build", "rattler")
_interrupted = threading.Event()


def interrupted() -> bool:
    """True once a SIGINT, SIGTERM or SIGHUP reached this command."""
    return _interrupted.is_set()


def _in_native_call(frame: FrameType | None) -> bool:
    """True when the signal is handled while native engine code runs: inside one of its callbacks,
    or native code checking for signals itself (no Python frame at all then)."""
    if frame is None:
        return True
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).split(".")[0] in _NATIVE_PACKAGES:
            return True
        frame = frame.f_back
    return False


def _python_handler(signum: int, frame: FrameType | None) -> None:
    _interrupted.set()
    if not _in_native_call(frame):
        raise KeyboardInterrupt


def _start_watcher(read_fd: int) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(_WATCHER), str(os.getpid())],
            stdin=read_fd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            # a session of its own: a signal to condapipe's process group (Ctrl-C, `kill -- -PGID`)
            # arriving before the watcher has set its dispositions would otherwise end it
            start_new_session=True,
        )
    except OSError:  # no watcher: Ctrl-C still works once the engine returns
        return None


@contextlib.contextmanager
def handling_interrupts(*, stop_children: bool = True) -> Iterator[None]:
    """Catch SIGINT, SIGTERM and SIGHUP for the duration of a command (main thread only; restored after).

    `stop_children`: start the watcher process that stops the build's processes at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _interrupted.clear()
    previous = {s: signal.getsignal(s) for s in _SIGNALS}
    watcher, write_fd, kept_read_fd, old_wakeup = None, -1, -1, -1
    if stop_children:
        # Only with a watcher reading it: a wakeup pipe whose reader is gone makes every signal
        # print "Exception ignored ... BrokenPipeError" from the C handler.
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        watcher = _start_watcher(read_fd)
        if watcher is None:
            os.close(read_fd)
            os.close(write_fd)
            write_fd = -1
        else:
            # The read end stays open here too, unread: should the watcher die anyway (OOM killer),
            # a write finds a full pipe at worst (ignored), never a broken one (a printed error).
            kept_read_fd = read_fd
            old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for s in _SIGNALS:
        if previous[s] is not signal.SIG_IGN:  # a shell that ignores SIGINT (a `&` job) keeps it ignored
            signal.signal(s, _python_handler)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if write_fd >= 0:
            signal.set_wakeup_fd(old_wakeup)
            os.close(write_fd)  # the watcher reads end-of-file and exits
            os.close(kept_read_fd)
        if watcher is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                watcher.wait(timeout=2)

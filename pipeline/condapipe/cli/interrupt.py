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

No handler runs on SIGKILL (or an out-of-memory kill, a crash), so the watcher also hears of each
build session as it starts and ends (condapipe.build_session) on a second pipe, and of
condapipe's normal end: when that pipe closes without it, condapipe is gone, and the watcher stops
every process of the sessions still live (the engine, its build script, ninja, the compilers).

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
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from condapipe import build_session

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
WATCH_DONE = b"done\n"  # condapipe's last word to the watcher: it ended as it should


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


def _start_watcher(read_fd: int, control_fd: int) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(_WATCHER), str(os.getpid()), str(control_fd)],
            stdin=read_fd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            pass_fds=(control_fd,),
            # a session of its own: a signal to condapipe's process group (Ctrl-C, `kill -- -PGID`)
            # arriving before the watcher has set its dispositions would otherwise end it
            start_new_session=True,
        )
    except OSError:  # no watcher: Ctrl-C still works once the engine returns
        return None


def _telling(control_fd: int) -> Callable[[str, int, int], None]:
    """A build_session listener that writes each session's start and end to the watcher."""

    def tell(event: str, session: int, start: int) -> None:
        with contextlib.suppress(OSError):  # a watcher gone (or a full pipe) loses nothing else
            os.write(control_fd, f"{event} {session} {start}\n".encode())

    return tell


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
    control_read, control_write = -1, -1
    listening: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if stop_children:
        # Only with a watcher reading it: a wakeup pipe whose reader is gone makes every signal
        # print "Exception ignored ... BrokenPipeError" from the C handler.
        read_fd, write_fd = os.pipe()
        control_read, control_write = os.pipe()
        os.set_blocking(write_fd, False)
        os.set_blocking(control_write, False)
        watcher = _start_watcher(read_fd, control_read)
        if watcher is None:
            for fd in (read_fd, write_fd, control_read, control_write):
                os.close(fd)
            write_fd = control_write = -1
        else:
            # The read ends stay open here too, unread: should the watcher die anyway (OOM killer),
            # a write finds a full pipe at worst (ignored), never a broken one (a printed error).
            kept_read_fd = read_fd
            old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
            listening = build_session.listening(_telling(control_write))
    for s in _SIGNALS:
        if previous[s] is not signal.SIG_IGN:  # a shell that ignores SIGINT (a `&` job) keeps it ignored
            signal.signal(s, _python_handler)
    try:
        with listening:
            yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if write_fd >= 0:
            signal.set_wakeup_fd(old_wakeup)
            with contextlib.suppress(OSError):
                os.write(control_write, WATCH_DONE)
            # the watcher reads end-of-file, after "done": condapipe ended as it should
            for fd in (write_fd, kept_read_fd, control_write, control_read):
                os.close(fd)
        if watcher is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                watcher.wait(timeout=2)

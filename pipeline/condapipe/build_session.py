"""The processes of one build: a session of their own, paused, continued and stopped as one.

An engine runs in a session of its own (no terminal can stop it on a read, and a Ctrl-C meant for
condapipe does not reach it half-way). Its process group is not the whole build: ninja starts every
compile command in a process group of its own (so that a terminal's Ctrl-C reaches ninja alone),
so a signal to the engine's group stops ninja and leaves gcc's cc1 running. The session holds them
all (nothing in a build calls setsid), and a session's id cannot be given to a new process while
any process of it lives, so "every process whose session is the engine's PID" is exactly the
build, found in /proc without walking a tree that changes while it is walked.

Listeners (the interrupt watcher, the work dir's lock record) hear of each session as it starts
and ends, so that a condapipe killed with SIGKILL leaves nothing running unnoticed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# How long a stopped build's processes get to end on SIGTERM (ninja stops its commands, a compiler
# removes its temporary files) before SIGKILL.
STOP_GRACE_S = 10.0
# Rounds of stopping what a round found still running (a process can start children until it stops).
_STOP_ROUNDS = 50


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat a build's supervision reads."""

    pid: int
    state: str
    ppid: int
    session: int
    start: int  # clock ticks after boot: with the PID, names one process for good


def proc_stat(pid: int) -> ProcStat | None:
    """/proc/PID/stat of a live process (None once it is gone or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    if fields[0] in ("Z", "X"):
        return None
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[3]), int(fields[19]))


def start_time(pid: int) -> int | None:
    stat = proc_stat(pid)
    return stat.start if stat else None


def boot_id() -> str:
    """This boot's id: a PID and start time recorded before a reboot name nothing after it."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def members(session: int, *, since: int | None = None) -> list[ProcStat]:
    """The live processes of `session`; with `since`, only those started at or after that tick
    (a session id reused after every process of the recorded one ended names newer processes)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        stat = proc_stat(int(entry.name))
        if stat and stat.session == session and (since is None or stat.start >= since):
            found.append(stat)
    return found


def _send(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def pause(session: int) -> None:
    """SIGSTOP every process of `session` (compilers in their own process groups too), until a
    round finds none left running: a process stopped mid-fork leaves its child to the next round."""
    for _ in range(_STOP_ROUNDS):
        running = [p for p in members(session) if p.state != "T" and p.pid != os.getpid()]
        if not running:
            return
        for proc in running:
            _send(proc.pid, signal.SIGSTOP)


def resume(session: int) -> None:
    """SIGCONT every process of `session`."""
    for proc in members(session):
        _send(proc.pid, signal.SIGCONT)


def stop(session: int, grace_s: float, *, since: int | None = None) -> int:
    """SIGTERM (and SIGCONT, so a paused one acts on it) every process of `session`, SIGKILL what
    is left after `grace_s`; returns how many processes there were. Returns once they are gone."""
    first = members(session, since=since)
    for proc in first:
        _send(proc.pid, signal.SIGTERM)
        _send(proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while (left := members(session, since=since)) and time.monotonic() < deadline:
        time.sleep(0.05)
    while left:
        for proc in left:
            _send(proc.pid, signal.SIGKILL)
        time.sleep(0.05)
        left = members(session, since=since)
    return len(first)


# --- who is told of a build's sessions ---------------------------------------------------------

Listener = Callable[[str, int, int], None]  # ("start" | "end", session, its leader's start time)
_listeners: list[Listener] = []
_live: dict[int, int] = {}
_lock = threading.Lock()


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Tell `listener` of every session started and ended while the block runs (and of those
    already live when it starts)."""
    with _lock:
        _listeners.append(listener)
        live = dict(_live)
    for session, start in live.items():
        listener("start", session, start)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


def live_sessions() -> dict[int, int]:
    """{session: its leader's start time} of the builds running now."""
    with _lock:
        return dict(_live)


def _tell(event: str, session: int, start: int) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        with contextlib.suppress(OSError):
            listener(event, session, start)


@contextlib.contextmanager
def supervised(leader: int) -> Iterator[None]:
    """Announce the session led by `leader` (a process just started with start_new_session) for
    the duration of the block, and pause it with condapipe on Ctrl-Z."""
    start = start_time(leader)
    if start is None:  # already gone: nothing of it can outlive us
        yield
        return
    with _lock:
        _live[leader] = start
    _tell("start", leader, start)
    try:
        with _stops_with_us(leader):
            yield
    finally:
        with _lock:
            _live.pop(leader, None)
        _tell("end", leader, start)


@contextlib.contextmanager
def _stops_with_us(session: int) -> Iterator[None]:
    """Ctrl-Z (SIGTSTP) pauses the whole build with condapipe, and `fg` resumes both.

    The build's session has no terminal, so the terminal's SIGTSTP reaches only condapipe; left
    alone, the compile would go on while the shell says "Stopped". A group in another session is
    orphaned and the kernel drops SIGTSTP sent to it, so every process of the build gets SIGSTOP;
    condapipe then stops itself the same way (also when nothing does job control for it) and,
    once continued (`fg`, `bg`, a closing terminal's SIGCONT), continues them all.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTSTP) == signal.SIG_IGN  # whoever started us wants no stops
    ):
        yield
        return

    stopping = False

    def on_tstp(signum: int, frame: object) -> None:
        # Python runs a handler inside another: a second Ctrl-Z while the first one stops the build
        # would pause, stop and (on fg) resume it, then return into the first one, which would
        # stop it all again. The stop under way answers both.
        nonlocal stopping
        if stopping:
            return
        stopping = True
        try:
            pause(session)
            os.kill(os.getpid(), signal.SIGSTOP)  # returns once something sends SIGCONT
        finally:  # also when the signal that woke us (a hang-up, SIGTERM) raises here
            stopping = False  # a Ctrl-Z from now on (fg done) stops the build again
            resume(session)

    before = signal.signal(signal.SIGTSTP, on_tstp)
    try:
        yield
    finally:
        signal.signal(signal.SIGTSTP, before)

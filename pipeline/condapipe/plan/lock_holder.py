"""Who holds a work dir: the condapipe process and the build sessions it runs, kept beside `.lock`.

The work dir's flock ends with its condapipe, but a build started by a condapipe that was killed
(SIGKILL, the out-of-memory killer, a lost SSH session whose watcher went too) can go on compiling
into the same folders. So the holder writes down its PID and start time and each build session it
starts (condapipe.build_session), and the next run, once it has the lock, stops whatever of those
sessions still runs before it builds anything there. A PID alone is not a process: it is checked
with its start time (and this boot's id) in /proc, so a PID reused since names nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from condapipe import build_session
from condapipe.bounded_json import loads_bounded
from condapipe.plan.atomic_files import atomic_write_text

HOLDER_FILE = ".lock-holder.json"


@dataclass
class Holder:
    """A condapipe that held the work dir: its process and the build sessions it had running."""

    pid: int
    start: int
    boot: str
    sessions: dict[int, int] = field(default_factory=dict)  # session id -> its leader's start tick

    def to_json(self) -> str:
        sessions = {str(k): v for k, v in sorted(self.sessions.items())}
        doc = {"pid": self.pid, "start": self.start, "boot": self.boot, "sessions": sessions}
        return json.dumps(doc, sort_keys=True) + "\n"

    def is_alive(self) -> bool:
        """True while the holder's own process runs (the same process: PID, start time, boot)."""
        return self.boot == build_session.boot_id() and build_session.start_time(self.pid) == self.start


def read_holder(work_dir: Path) -> Holder | None:
    """The holder recorded in `work_dir`, None when there is none or it cannot be read."""
    try:
        doc = loads_bounded((work_dir / HOLDER_FILE).read_bytes(), max_bytes=1 << 20)
        sessions = {int(k): int(v) for k, v in dict(doc.get("sessions") or {}).items()}
        return Holder(int(doc["pid"]), int(doc["start"]), str(doc["boot"]), sessions)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def stop_leftovers(holder: Holder) -> int:
    """Stop what still runs of `holder`'s build sessions (its condapipe is gone); returns how many
    processes there were. A session whose leader's PID now names another process is not it."""
    if holder.boot != build_session.boot_id():
        return 0  # recorded before a reboot: nothing of it runs
    stopped = 0
    for session, start in holder.sessions.items():
        leader = build_session.proc_stat(session)
        if leader is not None and leader.start != start:
            continue
        stopped += build_session.stop(session, build_session.STOP_GRACE_S, since=start)
    return stopped


@contextlib.contextmanager
def recording(work_dir: Path) -> Iterator[None]:
    """Keep `work_dir`'s holder file naming this process and its live build sessions; removed at
    the end (a run that ends as it should leaves nothing for the next to stop)."""
    me = Holder(os.getpid(), build_session.start_time(os.getpid()) or 0, build_session.boot_id())
    path = work_dir / HOLDER_FILE

    def save(event: str, session: int, start: int) -> None:
        if event == "start":
            me.sessions[session] = start
        else:
            me.sessions.pop(session, None)
        atomic_write_text(path, me.to_json())

    atomic_write_text(path, me.to_json())
    try:
        with build_session.listening(save):
            yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()

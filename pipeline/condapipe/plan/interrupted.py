"""Steps that started and never finished: what a rerun says about a build that was stopped.

A step records that it started (`<work dir>/started/<step>.json`: its input hash and the time) and
removes the record when it finishes, whether it ran or failed. A record still there on the next
run means the step was stopped on the way (Ctrl-C, SIGTERM, kill -9, a reboot): the rerun says so,
and says whether its inputs are the ones it was stopped with, instead of "not done before". What
the step keeps between the two runs is the step's own business (a build's compile cache under
`<work dir>/compile-cache`); `condapipe clean` removes these records with the build trees.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from condapipe.plan.state import atomic_write_text

STARTED_DIR = "started"


@dataclass(frozen=True)
class Started:
    """A step's start that no finish followed."""

    input_hash: str
    started_at: float  # time.time() when it started
    last_seen: float  # the record's mtime: refreshed while the step runs (see touch)

    def describe(self) -> str:
        """ "stopped at 06:41 after 3m12s" (local time), as far as the record can tell."""
        ran = max(0.0, self.last_seen - self.started_at)
        when = f"started {time.strftime('%H:%M', time.localtime(self.started_at))}"
        return f"{when}, ran ≥{_span(ran)}" if ran >= 1 else when


def _span(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _path(work_dir: Path, step_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in step_id)
    return work_dir / STARTED_DIR / f"{safe}.json"


def mark_started(work_dir: Path, step_id: str, input_hash: str) -> None:
    """Record the start (temp name, then rename: a kill never leaves half a record)."""
    path = _path(work_dir, step_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"step": step_id, "input_hash": input_hash, "started_at": time.time()}
    atomic_write_text(path, json.dumps(doc, sort_keys=True) + "\n")


def touch(work_dir: Path, step_id: str) -> None:
    """Renew the record's mtime (the display's heartbeat calls this): how long it ran, after a kill."""
    path = _path(work_dir, step_id)
    with contextlib.suppress(OSError):
        path.touch(exist_ok=True)


def finished(work_dir: Path, step_id: str) -> None:
    """The step ended (ran or failed): nothing to continue."""
    _path(work_dir, step_id).unlink(missing_ok=True)


def previous(work_dir: Path, step_id: str) -> Started | None:
    """The unfinished start of `step_id`, or None (also for an unreadable record)."""
    path = _path(work_dir, step_id)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Started(str(raw["input_hash"]), float(raw["started_at"]), path.stat().st_mtime)
    except (OSError, ValueError, KeyError, TypeError):
        return None

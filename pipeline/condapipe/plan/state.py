"""The resumable state file: which plan steps finished, with which inputs, producing which files.

Builds take hours and die (OOM, disk, network, a closed laptop). Every finished step is written
here at once, atomically, with a hash of its inputs and a fingerprint of each output file, so a
rerun skips exactly the steps whose inputs are unchanged and whose outputs are still on disk as
they were left. A half-written state file is impossible: writes go to a temporary name in the
same directory, are fsynced, then renamed over the old file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from condapipe.bounded_json import loads_bounded
from condapipe.errors import EnvironmentProblem
from condapipe.hashing import hash_file
from condapipe.package import pass_record
from condapipe.plan.atomic_files import atomic_write_text

STATE_FILE = "state.json"
SCHEMA = 1


@dataclass(frozen=True)
class FileRecord:
    """An output file as it was when its step finished."""

    path: str
    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> FileRecord:
        st = path.stat()
        known = pass_record.trusted(path)  # --pack-from-stage: the fix step hashed this very file
        sha256 = known.digest.sha256 if known and known.digest else hash_file(path).sha256
        return cls(str(path), st.st_size, st.st_mtime_ns, sha256)

    def unchanged(self) -> bool:
        """Still there with the same size and mtime (a stat, not a re-hash: reruns must be instant)."""
        try:
            st = Path(self.path).stat()
        except OSError:
            return False
        return st.st_size == self.size and st.st_mtime_ns == self.mtime_ns

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}


@dataclass(frozen=True)
class StepRecord:
    """One finished step: its inputs hash, output files and small JSON facts (verify results, ...)."""

    step_id: str
    input_hash: str
    input_parts: Mapping[str, str] = field(default_factory=dict)  # per-input digests: says what changed
    outputs: tuple[FileRecord, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    finished_at: float = 0.0
    seconds: float = 0.0

    def outputs_unchanged(self) -> bool:
        return all(f.unchanged() for f in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "input_hash": self.input_hash,
            "input_parts": dict(self.input_parts),
            "outputs": [f.to_dict() for f in self.outputs],
            "data": dict(self.data),
            "finished_at": self.finished_at,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StepRecord:
        return cls(
            step_id=str(raw["step_id"]),
            input_hash=str(raw["input_hash"]),
            input_parts={str(k): str(v) for k, v in raw.get("input_parts", {}).items()},
            outputs=tuple(FileRecord(**f) for f in raw.get("outputs", ())),
            data=dict(raw.get("data", {})),
            finished_at=float(raw.get("finished_at", 0.0)),
            seconds=float(raw.get("seconds", 0.0)),
        )


class StateFile:
    """The finished steps of one work directory, persisted after every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._steps: dict[str, StepRecord] = {}
        self.discarded: str | None = None  # why an unreadable old state file was set aside
        self._load()

    def _load(self) -> None:
        try:
            raw = loads_bounded(self.path.read_bytes())
            if raw.get("schema") != SCHEMA:
                raise ValueError(f"schema {raw.get('schema')!r}, expected {SCHEMA}")
            self._steps = {k: StepRecord.from_dict(v) for k, v in raw.get("steps", {}).items()}
        except FileNotFoundError:
            return
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Atomic writes make this unlikely; if it happens (edited by hand, other version), start over
            # but keep the old file for inspection (set aside at the first save, so a dry run changes
            # nothing) instead of failing the build.
            aside = self.path.with_name(self.path.name + ".unreadable")
            self.discarded = f"{self.path} was unreadable ({exc}); moved to {aside}, all steps will run"
            self._steps = {}

    def get(self, step_id: str) -> StepRecord | None:
        return self._steps.get(step_id)

    def steps(self) -> dict[str, StepRecord]:
        return dict(self._steps)

    def record(self, rec: StepRecord) -> None:
        """Remember a finished step and persist at once (a kill right after must not lose it)."""
        self._steps[rec.step_id] = rec
        self._save()

    def forget(self, step_id: str) -> None:
        if self._steps.pop(step_id, None) is not None:
            self._save()

    def _save(self) -> None:
        if self.discarded is not None and self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".unreadable"))
            self.discarded = None
        doc = {
            "schema": SCHEMA,
            "updated_at": time.time(),
            "steps": {k: v.to_dict() for k, v in sorted(self._steps.items())},
        }
        atomic_write_text(self.path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


@contextlib.contextmanager
def work_dir_lock(work_dir: Path, notify: Callable[[str], None] | None = None) -> Iterator[None]:
    """One pipeline per work directory: two runs writing the same state and outputs would corrupt both.

    A flock dies with its process, so a `kill -9`ed run never leaves a stale lock behind; what it
    may leave is its build, still compiling into this work dir (its watcher killed too): the
    holder file names it, and it is stopped before anything is built here (lock_holder), and
    `notify` (the CLI's one line on stderr) is told so.
    """
    from condapipe.plan import lock_holder

    work_dir.mkdir(parents=True, exist_ok=True)
    lock_path = work_dir / ".lock"
    with lock_path.open("a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder.read_holder(work_dir)
            who = f" (pid {holder.pid})" if holder is not None and holder.is_alive() else ""
            stop = f", stop it with `kill {holder.pid}`" if who and holder is not None else ""
            raise EnvironmentProblem(
                f"another condapipe build{who} is running in {work_dir}",
                fix=f"wait for it to finish{stop}, or pass a different --work-dir",
            ) from None
        try:
            earlier = lock_holder.read_holder(work_dir)
            if earlier is not None and (stopped := lock_holder.stop_leftovers(earlier)) and notify:
                notify(
                    f"condapipe: stopped {stopped} processes of an earlier build in {work_dir} "
                    f"that outlived its condapipe (pid {earlier.pid})"
                )
            with lock_holder.recording(work_dir):
                yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

"""The per-file outcome of a publish (local channel or anaconda.org) and the batch summary.

Both destinations report with the same statuses so that scripts and the summary table do not
care where packages went.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path


class Status(str, enum.Enum):
    """What happened to one file. `ok` says whether the batch can still exit 0."""

    UPLOADED = "uploaded"
    REPLACED = "replaced"  # --force: a different file with the same name was replaced
    EXISTS = "already-there"  # same sha256 already at the destination
    SKIPPED = "skipped"  # --skip-existing: a different file is there and was left alone
    REFUSED = "refused"  # a different file is there and neither --force nor --skip-existing
    BLOCKED = "blocked"  # verify found defects
    FAILED = "failed"
    RESTORED = "restored"  # an interrupted --force had removed it; the old file was put back
    WOULD_UPLOAD = "would-upload"
    WOULD_REPLACE = "would-replace"

    @property
    def ok(self) -> bool:
        return self not in (Status.REFUSED, Status.BLOCKED, Status.FAILED)


@dataclass(frozen=True)
class FileOutcome:
    """One package file's result; `detail` is already free of secrets."""

    path: Path
    basename: str
    target: str
    status: Status
    sha256: str
    size: int
    detail: str = ""
    attempts: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "file": str(self.path),
            "basename": self.basename,
            "target": self.target,
            "status": self.status.value,
            "ok": self.status.ok,
            "sha256": self.sha256,
            "size": self.size,
            "detail": self.detail,
            "attempts": self.attempts,
            "seconds": round(self.seconds, 3),
        }

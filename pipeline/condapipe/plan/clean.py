"""What `condapipe clean` may remove from a work dir, and removing it without ever leaving it.

A work dir holds build trees (an interrupted toy build leaves tens of MB, a PyTorch one tens of
GB), caches and the record of what finished. Cleaning removes only the entries condapipe itself
names, directly inside the work dir, never following a link: a symlinked entry loses the link,
not its target. The work dir must be one condapipe made (its `.lock` or `state.json`), must not
be a link, and an entry holding something the user keeps (the output channel, the current
directory, a source tree, $HOME) is kept and said so. `upload/` (an interrupted --force's journal)
is never touched.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from condapipe.errors import UsageError

# Build trees and the state that points into them: removing them means the next build starts over.
BUILD_TREES = (
    "steps",
    "started",
    "rattler-build",
    "conda-bld",
    "recipes",
    "sources",
    "tool-channel",
    "conda-build-python.yaml",
    "state.json",
)
# Caches that make a rebuild fast: removed only with --caches or --all.
CACHES = ("compile-cache", "pkgs")
# Logs and the last build's report: removed only with --all.
RECORDS = ("logs", "report.json", "report.md")
MARKERS = (".lock", "state.json")


@dataclass(frozen=True)
class CleanEntry:
    """One entry of the work dir: removed (with its size) or kept (with why)."""

    path: Path
    size: int
    kept: str | None = None  # why it stays, or None when it goes

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "bytes": self.size, "kept": self.kept}


def _size(path: Path) -> int:
    """Bytes under `path`, links counted as links (never followed)."""
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        return info.st_size
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in [*dirs, *files]:
            try:
                entry = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not stat.S_ISDIR(entry.st_mode):
                total += entry.st_size
    return total


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_work_dir(work_dir: Path) -> Path:
    """The work dir, resolved; UsageError unless it is a real folder condapipe made."""
    if work_dir.is_symlink():
        raise UsageError(f"--work-dir {work_dir} is a symbolic link; name the folder it points to")
    if not work_dir.is_dir():
        raise UsageError(f"--work-dir {work_dir}: no such folder (nothing to clean)")
    real = work_dir.resolve()
    if real == Path("/") or real == Path.home().resolve():
        raise UsageError(f"--work-dir {work_dir} is / or $HOME; refusing to clean it")
    if not any((real / m).is_file() and not (real / m).is_symlink() for m in MARKERS):
        markers = " or ".join(MARKERS)
        raise UsageError(
            f"--work-dir {work_dir} is not a condapipe work dir (no {markers}); refusing to clean it"
        )
    return real


def plan_clean(work_dir: Path, names: Iterable[str], protected: Iterable[Path]) -> list[CleanEntry]:
    """The entries `names` of `work_dir` that exist, each to remove or keep (holding a protected path)."""
    real = check_work_dir(work_dir)
    keep = [Path(os.path.abspath(p)) for p in protected]
    keep += [p.resolve() for p in list(keep) if p.exists()]
    out: list[CleanEntry] = []
    for name in names:
        entry = real / name
        if not entry.is_symlink() and not entry.exists():
            continue
        holds = [p for p in keep if _inside(p, entry)]
        why = f"holds {holds[0]}" if holds else None
        out.append(CleanEntry(entry, _size(entry), why))
    return out


def remove_entries(entries: Iterable[CleanEntry]) -> int:
    """Remove each entry not kept (a link: the link only); the bytes freed."""
    freed = 0
    for entry in entries:
        if entry.kept:
            continue
        path = entry.path
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path)  # rmtree unlinks links inside, never follows them
        freed += entry.size
    return freed


__all__ = ["BUILD_TREES", "CACHES", "RECORDS", "CleanEntry", "check_work_dir", "plan_clean", "remove_entries"]

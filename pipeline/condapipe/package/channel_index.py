"""A local channel's index: repodata for every subdir, under a lock, incrementally.

Indexing belongs to no stage: publish indexes the channel it puts built packages into, the input
channels (condapipe.inputchannels) index the packages they make from wheels before a build, and
the plan makes an empty output dir a channel before an engine searches it. The records themselves
are written by condapipe.package.repodata; a lock file serialises condapipe processes that index
(or publish to) the same channel.
"""

from __future__ import annotations

import fcntl
import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.package import repodata
from condapipe.package.io import package_suffix
from condapipe.package.repodata import Known
from condapipe.safe_paths import destination

REPODATA = repodata.REPODATA
LOCK_NAME = ".condapipe-channel.lock"


@contextmanager
def channel_lock(channel_dir: Path) -> Iterator[None]:
    """An exclusive lock so that two condapipe processes never index the same channel at once."""
    channel_dir.mkdir(parents=True, exist_ok=True)
    with (channel_dir / LOCK_NAME).open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class IndexResult:
    """Which subdirs of which channel were indexed, with their package counts."""

    channel: Path
    subdirs: dict[str, int]
    full: bool

    def to_dict(self) -> dict:
        return {"channel": str(self.channel), "subdirs": self.subdirs, "full_reindex": self.full}


def _subdirs(channel_dir: Path) -> list[str]:
    return sorted(
        p.name
        for p in channel_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name not in {"shards"}
    )


def _stale(channel_dir: Path) -> bool:
    """True when repodata lists a file that changed on disk since it was written.

    A package replaced in place (same file name, new bytes) has a different size or is newer
    than the repodata that lists it; py-rattler's incremental mode would keep its old sha256.
    """
    for subdir in _subdirs(channel_dir):
        repodata = channel_dir / subdir / REPODATA
        if not repodata.is_file():
            continue
        try:
            written = repodata.stat().st_mtime_ns
            data = json.loads(repodata.read_bytes())
        except (OSError, ValueError):
            return True
        if not isinstance(data, dict):
            return True
        for key in ("packages", "packages.conda"):
            records = data.get(key) or {}
            if not isinstance(records, dict) or not all(isinstance(r, dict) for r in records.values()):
                return True
            for filename, record in records.items():
                try:
                    info = (channel_dir / subdir / filename).stat()
                except OSError:
                    continue
                if info.st_size != record.get("size") or info.st_mtime_ns > written:
                    return True
    return False


def _count(channel_dir: Path, subdir: str) -> int:
    data = json.loads((channel_dir / subdir / REPODATA).read_text())
    return len(data.get("packages") or {}) + len(data.get("packages.conda") or {})


def index_channel(
    channel_dir: Path,
    *,
    force: bool = False,
    dry_run: bool = False,
    init: bool = True,
    known: Mapping[Path, Known] | None = None,
) -> IndexResult:
    """Write repodata.json (+ .zst) for every subdir of a local channel (condapipe.package.repodata).

    Incremental by default: records of files that have not changed since the repodata was
    written are kept; a full re-index happens with force=True or when a package was replaced in
    place. `known` holds what a publisher already computed for files it just placed (by their
    channel path), so they are not read again. With init=False a folder that is not a channel
    yet (no noarch/ or platform folder) is refused. A damaged package is named, not a crash.
    """
    channel_dir = destination(channel_dir, "channel")
    if not channel_dir.is_dir():
        raise UsageError(f"{channel_dir}: no such directory")
    if not init and not any(_PLATFORM.fullmatch(s) for s in _subdirs(channel_dir)):
        raise UsageError(
            f"{channel_dir}: not a conda channel (no noarch/ or platform folder such as linux-64/); "
            "use --init to make it one"
        )
    _check_outputs(channel_dir)
    full = force or _stale(channel_dir)
    if dry_run:
        subdirs = sorted(set(_subdirs(channel_dir)) | {"noarch"})
        counts = {s: sum(1 for p in (channel_dir / s).glob("*") if package_suffix(p.name)) for s in subdirs}
        return IndexResult(channel_dir, counts, full)
    with channel_lock(channel_dir):
        (channel_dir / "noarch").mkdir(exist_ok=True)  # conda channels always have noarch
        subdirs = [s for s in _subdirs(channel_dir) if _PLATFORM.fullmatch(s)]
        planned = {s: _subdir_records(channel_dir / s, full, known or {}) for s in subdirs}
        bad = [problem for _records, problems in planned.values() for problem in problems]
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise UsageError(f"cannot index {channel_dir}: {bad[0]}{more}; remove or replace it")
        try:
            for subdir, (records, _problems) in planned.items():
                repodata.write_repodata(channel_dir / subdir, subdir, records)
        except OSError as exc:
            raise EnvironmentProblem(
                f"indexing {channel_dir} failed: {exc}", "check that the directory is writable"
            ) from exc
    return IndexResult(channel_dir, {s: _count(channel_dir, s) for s in subdirs}, full)


def _subdir_records(
    subdir_dir: Path, full: bool, known: Mapping[Path, Known]
) -> tuple[dict[str, dict], list[str]]:
    """(filename -> record, problems) for one subdir: kept, known, or read from the package."""
    listed, written = ({}, 0) if full else repodata.load_records(subdir_dir)
    records: dict[str, dict] = {}
    problems: list[str] = []
    for path in repodata.package_files(subdir_dir):
        old = listed.get(path.name)
        if old is not None and repodata.still_valid(path, old, written):
            records[path.name] = old
            continue
        try:
            records[path.name] = repodata.record(path, known.get(path))
        except UsageError as exc:
            problems.append(str(exc))
    return records, problems


_PLATFORM = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")
# What an indexer writes into each subdir: each must be a file (or absent) for the rename to work.
_INDEX_OUTPUTS = (REPODATA, repodata.REPODATA_ZST, *repodata.FOREIGN_OUTPUTS)


def _check_outputs(channel_dir: Path) -> None:
    """Refuse a channel where an index output is a folder or a special file (rename would fail)."""
    for subdir in _subdirs(channel_dir):
        for name in _INDEX_OUTPUTS:
            path = channel_dir / subdir / name
            if (path.exists() or path.is_symlink()) and (path.is_symlink() or not path.is_file()):
                raise UsageError(f"{path}: expected a file written by the indexer, found something else")


def ensure_channel(channel_dir: Path) -> None:
    """Make `channel_dir` a valid (possibly empty) channel before a build searches it.

    rattler-build ignores a local channel without noarch/repodata.json while solving build envs,
    but its test step then fails with a bare "Test failed", so callers prepare every local channel
    they hand to an engine.
    """
    channel_dir = Path(channel_dir)
    channel_dir.mkdir(parents=True, exist_ok=True)
    if not (channel_dir / "noarch" / REPODATA).exists():
        index_channel(channel_dir)

"""Local conda channels: the one publish path (lock, linked-or-copied file, repodata).

A channel directory is read by solvers (and HTTP servers) while we write to it, so a package
enters under a hidden temporary name and is renamed into place — a hard link to the built file
where both are on one filesystem (nothing copied), else a copy — and repodata is written by
condapipe.package.repodata from what indexing needs (index.json from a .conda's small info
member, one hashing pass, hashes the publisher already has), through temporary names and
renames as well. A lock file serialises condapipe processes publishing to the same channel.
Builds (`build RECIPE_DIR`, the plan's publish step) and `upload --to DIR` all publish through
`publish_packages`; the engines only build.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.hashing import CHUNK, FileDigest, hash_file
from condapipe.package import repodata
from condapipe.package.io import PackageInfo, package_suffix, read_index, read_package_info
from condapipe.package.repodata import Known
from condapipe.publish.upload_result import FileOutcome, Status
from condapipe.safe_paths import destination

REPODATA = repodata.REPODATA
LOCK_NAME = ".condapipe-channel.lock"
TEMP_SUFFIX = ".part"  # atomic_copy's hidden temporary files: `.<name>.<random>.part`


def find_packages(directory: Path) -> list[Path]:
    """Every conda package below a directory (a build output folder or a channel), sorted."""
    if not directory.is_dir():
        raise UsageError(f"{directory}: no such directory")
    found = [p for p in directory.rglob("*") if p.is_file() and package_suffix(p.name)]
    return sorted(
        p for p in found if not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


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


def atomic_copy(src: Path, dest: Path) -> None:
    """Put src at dest through a hidden temporary name in dest's folder, then rename: a hard link
    where both are on one filesystem (a package is never written in place, so the two names
    cannot drift apart), else a copy made durable before the rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=TEMP_SUFFIX, dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        os.close(fd)
        if not _link(src, tmp):
            with tmp.open("wb") as out, src.open("rb") as inp:
                shutil.copyfileobj(inp, out, CHUNK)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _link(src: Path, tmp: Path) -> bool:
    """Replace the empty temporary file by a hard link to src; False where linking cannot work."""
    if src.is_symlink() or (src.stat().st_mode & 0o777) != 0o644:
        return False  # a link shares the mode: only a file with the mode a copy would get
    staged = tmp.with_name(tmp.name.removesuffix(TEMP_SUFFIX) + ".link" + TEMP_SUFFIX)
    try:
        os.link(src, staged)
    except OSError as exc:
        if exc.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
            return False
        raise
    os.replace(staged, tmp)
    return True


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


def channel_dir_from_target(target: str) -> Path:
    """`--to DIR` or `--to file:///abs/dir` → a local path."""
    if target.startswith("file://"):
        from urllib.parse import unquote, urlparse

        parsed = urlparse(target)
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"--to {target}: only local file:// URLs are supported")
        return destination(unquote(parsed.path), f"--to {target}")
    if "://" in target:
        raise UsageError(f"--to {target}: expected a directory or a file:// URL")
    return destination(target, "--to")


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


def remove_stale_temp(channel_dir: Path) -> None:
    """Temp files of a publish killed mid-copy (hidden, never indexed) are removed by the next one."""
    if not channel_dir.is_dir():
        return
    for sub in channel_dir.iterdir():
        if sub.is_dir():
            for tmp in sub.glob(f".*{TEMP_SUFFIX}"):
                tmp.unlink(missing_ok=True)
    shutil.rmtree(channel_dir / ".tmp", ignore_errors=True)  # py-rattler's staging folder


def publish_packages(
    channel_dir: Path,
    packages: Sequence[PackageInfo | Path],
    *,
    skip_existing: bool = False,
    force: bool = False,
    dry_run: bool = False,
    on_published: Callable[[FileOutcome], None] | None = None,
) -> tuple[list[FileOutcome], IndexResult | None]:
    """Put packages into a local channel, then re-index it: the one way packages enter a channel.

    Under the channel lock, each package goes to `<subdir>/<name-version-build.ext>` through a
    hidden temporary name and a rename (a hard link where possible), read once to hash it; the
    index takes those hashes and the package's index.json rather than reading it again. An
    existing file with the same sha256 is reported as already there; a different one is refused
    unless `force` (replace: a rebuild) or `skip_existing` (leave it) is given. `on_published` is
    called after each package.
    """
    channel_dir = Path(channel_dir)
    infos = [p if isinstance(p, PackageInfo) else read_package_info(Path(p)) for p in packages]
    outcomes: list[FileOutcome] = []
    known: dict[Path, Known] = {}
    replaced = False
    with channel_lock(channel_dir) if not dry_run else nullcontext():
        if not dry_run:
            remove_stale_temp(channel_dir)
        for info in infos:
            dest = channel_dir / info.subdir / info.filename
            digest = hash_file(info.path, md5=True)  # the one read of the package: repodata needs both
            outcome = _publish_one(info, dest, digest, skip_existing, force, dry_run)
            replaced = replaced or outcome.status in (Status.REPLACED, Status.WOULD_REPLACE)
            if outcome.status in (Status.UPLOADED, Status.REPLACED):
                known[dest] = Known.placed(dest, digest, read_index(info.path))
            outcomes.append(outcome)
            if on_published is not None:
                on_published(outcome)
    # A replaced file must be re-hashed: an incremental index could keep its old sha256.
    result = (
        index_channel(channel_dir, force=replaced, dry_run=dry_run, known=known)
        if channel_dir.is_dir()
        else None
    )
    return outcomes, result


def _publish_one(
    info: PackageInfo, dest: Path, digest: FileDigest, skip_existing: bool, force: bool, dry_run: bool
) -> FileOutcome:
    target = str(dest)
    sha, size = digest.sha256, digest.size
    if dest.exists():
        there = hash_file(dest).sha256
        if there == sha:
            return FileOutcome(info.path, info.basename, target, Status.EXISTS, sha, size)
        if skip_existing:
            detail = "a different file with this name is there (kept, --skip-existing)"
            return FileOutcome(info.path, info.basename, target, Status.SKIPPED, sha, size, detail)
        if not force:
            detail = f"a different file is there (sha256 {there[:12]}…); use --force to replace it"
            return FileOutcome(info.path, info.basename, target, Status.REFUSED, sha, size, detail)
        status = Status.WOULD_REPLACE if dry_run else Status.REPLACED
    else:
        status = Status.WOULD_UPLOAD if dry_run else Status.UPLOADED
    if not dry_run:
        try:
            atomic_copy(info.path, dest)
        except OSError as exc:
            return FileOutcome(info.path, info.basename, target, Status.FAILED, sha, size, str(exc))
    return FileOutcome(info.path, info.basename, target, status, sha, size, attempts=1)

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
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path

from condapipe.errors import UsageError
from condapipe.hashing import CHUNK, FileDigest, hash_file
from condapipe.package import pass_record
from condapipe.package.channel_index import IndexResult, channel_lock, index_channel
from condapipe.package.io import PackageInfo, package_suffix, read_index, read_package_info
from condapipe.package.repodata import Known
from condapipe.publish.upload_result import FileOutcome, Status
from condapipe.safe_paths import destination

TEMP_SUFFIX = ".part"  # atomic_copy's hidden temporary files: `.<name>.<random>.part`


def find_packages(directory: Path) -> list[Path]:
    """Every conda package below a directory (a build output folder or a channel), sorted."""
    if not directory.is_dir():
        raise UsageError(f"{directory}: no such directory")
    found = [p for p in directory.rglob("*") if p.is_file() and package_suffix(p.name)]
    return sorted(
        p for p in found if not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


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
            digest = _digest(info.path)
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


def _digest(package: Path) -> FileDigest:
    """sha256 + md5 + size for repodata: the one read of the package, or none where the pass that
    wrote it hashed it and it is still that file (--pack-from-stage, condapipe.package.pass_record)."""
    known = pass_record.trusted(package)
    if known is not None and known.digest is not None and known.digest.md5:
        return known.digest
    return hash_file(package, md5=True)


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

"""Local conda channels: read package metadata, copy packages in atomically, index with py-rattler.

A channel directory is read by solvers (and HTTP servers) while we write to it, so a package
is copied under a hidden temporary name and renamed into place, and repodata is written by
py-rattler's indexer, which itself writes to a temporary file and renames it (checked with
strace on py-rattler 0.28). A lock file serialises condapipe processes publishing to the
same channel.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.publish.upload_result import FileOutcome, Status

PACKAGE_SUFFIXES: tuple[str, ...] = (".conda", ".tar.bz2")
REPODATA = "repodata.json"
LOCK_NAME = ".condapipe-channel.lock"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class PackageInfo:
    """What condapipe needs to know about a package file: identity, subdir and dependencies."""

    path: Path
    name: str
    version: str
    build: str
    build_number: int
    subdir: str
    depends: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ext(self) -> str:
        return package_suffix(self.path.name) or ""

    @property
    def filename(self) -> str:
        """The canonical file name: name-version-build.ext (what channels and anaconda.org use)."""
        return f"{self.name}-{self.version}-{self.build}{self.ext}"

    @property
    def basename(self) -> str:
        """subdir/filename, anaconda.org's name for a distribution."""
        return f"{self.subdir}/{self.filename}"


def package_suffix(filename: str) -> str | None:
    """The conda package extension of a file name, or None when it is not a conda package."""
    return next((s for s in PACKAGE_SUFFIXES if filename.endswith(s)), None)


def read_package_info(path: Path) -> PackageInfo:
    """Read info/index.json from a .conda or .tar.bz2 without unpacking the payload."""
    from conda_package_streaming.package_streaming import CondaComponent, stream_conda_component

    if package_suffix(path.name) is None:
        raise UsageError(f"{path}: not a conda package (expected .conda or .tar.bz2)")
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    index: dict | None = None
    try:
        with path.open("rb") as fileobj:
            stream = stream_conda_component(str(path), fileobj, CondaComponent.info)
            for tar, member in stream:
                if member.name == "info/index.json":
                    reader = tar.extractfile(member)
                    index = json.loads(reader.read()) if reader else None
                    stream.close()
                    break
    except Exception as exc:
        raise UsageError(f"{path}: not a readable conda package ({type(exc).__name__}: {exc})") from None
    if not isinstance(index, dict) or not all(isinstance(index.get(k), str) for k in ("name", "version")):
        raise UsageError(f"{path}: info/index.json is missing or lacks name/version")
    subdir = index.get("subdir") or ("noarch" if index.get("arch") is None else None)
    if not subdir:
        raise UsageError(f"{path}: info/index.json has no subdir")
    return PackageInfo(
        path=path,
        name=index["name"],
        version=index["version"],
        build=str(index.get("build", "0")),
        build_number=int(index.get("build_number", 0)),
        subdir=subdir,
        depends=tuple(index.get("depends") or ()),
    )


def file_digests(path: Path) -> tuple[str, str]:
    """(sha256 hex, md5 hex) of a file, read in 1 MiB chunks so memory stays flat."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest()


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
    """Copy src to dest through a hidden temporary name in dest's folder, then rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
            shutil.copyfileobj(inp, out, _CHUNK)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
            data = json.loads(repodata.read_text())
        except (OSError, ValueError):
            return True
        for key in ("packages", "packages.conda"):
            for filename, record in (data.get(key) or {}).items():
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


def index_parallelism(largest_package: int, ram_bytes: int, cpus: int) -> int:
    """How many packages py-rattler may index at once.

    py-rattler 0.28 holds each package it indexes in memory (measured: peak RSS ~2x the
    package, 4.1 GiB for one 2 GiB package), so parallel indexing of several 2 GB pytorch
    builds could exhaust RAM. Allow as many as fit in a quarter of RAM, at least 1.
    """
    per_package = max(1, 2 * largest_package)
    return max(1, min(cpus, (ram_bytes // 4) // per_package))


def _machine_ram() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _largest_package(channel_dir: Path) -> int:
    sizes = [
        p.stat().st_size
        for s in _subdirs(channel_dir)
        for p in (channel_dir / s).iterdir()
        if package_suffix(p.name) and p.is_file()
    ]
    return max(sizes, default=0)


def index_channel(channel_dir: Path, *, force: bool = False, dry_run: bool = False) -> IndexResult:
    """Write repodata.json (+ .zst and shards) for every subdir of a local channel with py-rattler.

    Incremental by default; a full re-index happens with force=True or when a package was
    replaced in place (py-rattler's incremental mode would keep the old sha256).
    """
    import rattler.index

    channel_dir = Path(channel_dir)
    if not channel_dir.is_dir():
        raise UsageError(f"{channel_dir}: no such directory")
    full = force or _stale(channel_dir)
    if dry_run:
        subdirs = sorted(set(_subdirs(channel_dir)) | {"noarch"})
        counts = {s: sum(1 for p in (channel_dir / s).glob("*") if package_suffix(p.name)) for s in subdirs}
        return IndexResult(channel_dir, counts, full)
    with channel_lock(channel_dir):
        (channel_dir / "noarch").mkdir(exist_ok=True)  # conda channels always have noarch
        try:
            jobs = index_parallelism(_largest_package(channel_dir), _machine_ram(), os.cpu_count() or 1)
            asyncio.run(rattler.index.index_fs(channel_dir, force=full, max_parallel=jobs))
        except Exception as exc:
            raise EnvironmentProblem(
                f"indexing {channel_dir} failed: {exc}", "check that the directory is writable"
            ) from None
        tmp = channel_dir / ".tmp"  # py-rattler's own staging folder
        if tmp.is_dir() and not any(tmp.iterdir()):
            tmp.rmdir()
    subdirs = [s for s in _subdirs(channel_dir) if (channel_dir / s / REPODATA).is_file()]
    return IndexResult(channel_dir, {s: _count(channel_dir, s) for s in subdirs}, full)


def channel_dir_from_target(target: str) -> Path:
    """`--to DIR` or `--to file:///abs/dir` → a local path."""
    if target.startswith("file://"):
        from urllib.parse import unquote, urlparse

        parsed = urlparse(target)
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"--to {target}: only local file:// URLs are supported")
        return Path(unquote(parsed.path))
    if "://" in target:
        raise UsageError(f"--to {target}: expected a directory or a file:// URL")
    return Path(target)


def publish_local(
    packages: Sequence[PackageInfo | Path],
    channel_dir: Path,
    *,
    skip_existing: bool = False,
    force: bool = False,
    dry_run: bool = False,
) -> tuple[list[FileOutcome], IndexResult | None]:
    """Copy packages into a local channel (same rules as anaconda.org uploads), then re-index it.

    An existing file with the same sha256 is reported as already there; a different one is
    refused unless force (replace) or skip_existing (leave it) is given.
    """
    channel_dir = Path(channel_dir)
    infos = [p if isinstance(p, PackageInfo) else read_package_info(Path(p)) for p in packages]
    outcomes: list[FileOutcome] = []
    replaced = False
    with channel_lock(channel_dir) if not dry_run else _nothing():
        for info in infos:
            dest = channel_dir / info.subdir / info.filename
            target = str(dest)
            sha, _md5 = file_digests(info.path)
            size = info.path.stat().st_size
            if dest.exists():
                there, _ = file_digests(dest)
                if there == sha:
                    outcomes.append(FileOutcome(info.path, info.basename, target, Status.EXISTS, sha, size))
                    continue
                if skip_existing:
                    detail = "a different file with this name is there (kept, --skip-existing)"
                    outcomes.append(
                        FileOutcome(info.path, info.basename, target, Status.SKIPPED, sha, size, detail)
                    )
                    continue
                if not force:
                    detail = f"a different file is there (sha256 {there[:12]}…); use --force to replace it"
                    outcomes.append(
                        FileOutcome(info.path, info.basename, target, Status.REFUSED, sha, size, detail)
                    )
                    continue
                status = Status.WOULD_REPLACE if dry_run else Status.REPLACED
                replaced = True
            else:
                status = Status.WOULD_UPLOAD if dry_run else Status.UPLOADED
            if not dry_run:
                try:
                    atomic_copy(info.path, dest)
                except OSError as exc:
                    outcomes.append(
                        FileOutcome(info.path, info.basename, target, Status.FAILED, sha, size, str(exc))
                    )
                    continue
            outcomes.append(FileOutcome(info.path, info.basename, target, status, sha, size, attempts=1))
    result = index_channel(channel_dir, force=replaced, dry_run=dry_run) if channel_dir.is_dir() else None
    return outcomes, result


@contextmanager
def _nothing() -> Iterator[None]:
    yield

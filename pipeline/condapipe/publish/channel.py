"""Local conda channels: the one publish path (lock, atomic copy, py-rattler index).

A channel directory is read by solvers (and HTTP servers) while we write to it, so a package
is copied under a hidden temporary name and renamed into place, and repodata is written by
py-rattler's indexer, which itself writes to a temporary file and renames it (checked with
strace on py-rattler 0.28). A lock file serialises condapipe processes publishing to the
same channel. Builds (`build RECIPE_DIR`, the plan's publish step) and `upload --to DIR` all
publish through `publish_packages`; the engines only build.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.hashing import CHUNK, hash_file
from condapipe.package.io import PackageInfo, package_suffix, read_package_info
from condapipe.publish.upload_result import FileOutcome, Status
from condapipe.safe_paths import destination

REPODATA = "repodata.json"
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
    """Copy src to dest through a hidden temporary name in dest's folder, then rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=TEMP_SUFFIX, dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
            shutil.copyfileobj(inp, out, CHUNK)
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


def index_channel(
    channel_dir: Path, *, force: bool = False, dry_run: bool = False, init: bool = True
) -> IndexResult:
    """Write repodata.json (+ .zst and shards) for every subdir of a local channel with py-rattler.

    Incremental by default; a full re-index happens with force=True or when a package was
    replaced in place (py-rattler's incremental mode would keep the old sha256). With
    init=False a folder that is not a channel yet (no noarch/ or platform folder) is refused.
    Packages py-rattler would read are checked first, so a damaged one is named, not a crash.
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
        _check_new_packages(channel_dir, full)
        (channel_dir / "noarch").mkdir(exist_ok=True)  # conda channels always have noarch
        jobs = index_parallelism(_largest_package(channel_dir), _machine_ram(), os.cpu_count() or 1)
        try:
            _run_indexer(channel_dir, full, jobs)
        finally:
            shutil.rmtree(channel_dir / ".tmp", ignore_errors=True)  # py-rattler's own staging folder
    subdirs = [s for s in _subdirs(channel_dir) if (channel_dir / s / REPODATA).is_file()]
    return IndexResult(channel_dir, {s: _count(channel_dir, s) for s in subdirs}, full)


_PLATFORM = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")
# What py-rattler writes into each subdir: each must be a file (or absent) for the rename to work.
_INDEX_OUTPUTS = (REPODATA, f"{REPODATA}.zst", "repodata_from_packages.json", "repodata_shards.msgpack.zst")

# py-rattler runs in a child process: a Rust panic or an abort at interpreter shutdown (py-rattler
# 0.28: "PyGILState_Release", SIGABRT/SIGSEGV after work that succeeded) cannot take condapipe
# down, and the child leaves with os._exit once it has said how the work went.
_INDEXER = r"""
import asyncio, os, sys
code = 0
try:
    import rattler.index
    asyncio.run(rattler.index.index_fs(sys.argv[1], force=sys.argv[2] == "1", max_parallel=int(sys.argv[3])))
    sys.stdout.write("condapipe-index: ok\n")
except BaseException as exc:
    sys.stdout.write("condapipe-index: failed: " + (str(exc).strip() or type(exc).__name__) + "\n")
    code = 1
sys.stdout.flush()
os._exit(code)
"""


def _run_indexer(channel_dir: Path, full: bool, jobs: int) -> None:
    argv = [sys.executable, "-c", _INDEXER, str(channel_dir), "1" if full else "0", str(jobs)]
    proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", check=False)
    said = [line for line in proc.stdout.splitlines() if line.startswith("condapipe-index: ")]
    verdict = said[-1].removeprefix("condapipe-index: ") if said else ""
    if verdict == "ok" and _repodata_ok(channel_dir):
        return  # whatever the library did while the child exited, the work is done and checked
    if verdict.startswith("failed: "):
        detail = verdict.removeprefix("failed: ").splitlines()[0][:300]
    elif proc.returncode < 0:
        detail = f"py-rattler crashed (signal {-proc.returncode})"
    else:
        tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        detail = f"py-rattler failed: {tail[:300]}"
    raise EnvironmentProblem(
        f"indexing {channel_dir} failed: {detail}",
        "check that the directory is writable; `condapipe verify` the packages added since the last index",
    )


def _repodata_ok(channel_dir: Path) -> bool:
    for subdir in _subdirs(channel_dir):
        repodata = channel_dir / subdir / REPODATA
        if not _PLATFORM.fullmatch(subdir) or not repodata.exists():
            continue
        try:
            json.loads(repodata.read_bytes())
        except (OSError, ValueError):
            return False
    return (channel_dir / "noarch" / REPODATA).is_file()


def _check_outputs(channel_dir: Path) -> None:
    """Refuse a channel where an index output is a folder or a special file (rename would fail)."""
    for subdir in _subdirs(channel_dir):
        for name in _INDEX_OUTPUTS:
            path = channel_dir / subdir / name
            if (path.exists() or path.is_symlink()) and (path.is_symlink() or not path.is_file()):
                raise UsageError(f"{path}: expected a file written by the indexer, found something else")


def _check_new_packages(channel_dir: Path, full: bool) -> None:
    """Read the metadata of every package py-rattler is about to read; name the damaged ones."""
    bad: list[str] = []
    for subdir in _subdirs(channel_dir):
        if not _PLATFORM.fullmatch(subdir):
            continue
        known = set() if full else _listed(channel_dir / subdir / REPODATA)
        for path in sorted((channel_dir / subdir).iterdir()):
            if not package_suffix(path.name) or path.name in known:
                continue
            try:
                read_package_info(path)
            except UsageError as exc:
                bad.append(str(exc))
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise UsageError(f"cannot index {channel_dir}: {bad[0]}{more}; remove or replace it")


def _listed(repodata: Path) -> set[str]:
    try:
        data = json.loads(repodata.read_bytes())
    except (OSError, ValueError):
        return set()
    if not isinstance(data, dict):
        return set()
    return {name for key in ("packages", "packages.conda") for name in (data.get(key) or {})}


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
    """Copy packages into a local channel, then re-index it: the one way packages enter a channel.

    Under the channel lock, each package goes to `<subdir>/<name-version-build.ext>` through a
    hidden temporary name and a rename. An existing file with the same sha256 is reported as
    already there; a different one is refused unless `force` (replace: a rebuild) or
    `skip_existing` (leave it) is given. `on_published` is called after each package.
    """
    channel_dir = Path(channel_dir)
    infos = [p if isinstance(p, PackageInfo) else read_package_info(Path(p)) for p in packages]
    outcomes: list[FileOutcome] = []
    replaced = False
    with channel_lock(channel_dir) if not dry_run else nullcontext():
        if not dry_run:
            remove_stale_temp(channel_dir)
        for info in infos:
            outcome = _publish_one(
                info, channel_dir / info.subdir / info.filename, skip_existing, force, dry_run
            )
            replaced = replaced or outcome.status in (Status.REPLACED, Status.WOULD_REPLACE)
            outcomes.append(outcome)
            if on_published is not None:
                on_published(outcome)
    # A replaced file must be re-hashed: an incremental index could keep its old sha256.
    result = index_channel(channel_dir, force=replaced, dry_run=dry_run) if channel_dir.is_dir() else None
    return outcomes, result


def _publish_one(
    info: PackageInfo, dest: Path, skip_existing: bool, force: bool, dry_run: bool
) -> FileOutcome:
    target = str(dest)
    digest = hash_file(info.path)
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

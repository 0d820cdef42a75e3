"""The one place that decides what a package member may be, and the only reader of package streams.

Packages come from anywhere, so unpacking follows the rules of Python's tarfile `data` filter and
conda's own extractor, made stricter where a conda package never needs the freedom:

- only regular files, directories, symlinks and hard links; device files, FIFOs, sockets and
  sparse or unknown member types are refused, and so are setuid/setgid bits;
- member names are relative, without `..` and not written through a symlink;
- a symlink's target is relative, may only climb (`../`) at its start, and lands inside the
  destination; a hard link names an earlier regular member of the same package;
- the expanded size and the member count are bounded (CONDAPIPE_MAX_UNPACK_BYTES /
  CONDAPIPE_MAX_UNPACK_FILES, read once into condapipe.process_settings, override the
  defaults), checked from the headers before writing;
- every stream is read to its end, so a truncated or corrupted bzip2 stream (end-of-stream
  marker), zstd frame (frame checks, content checksum) or zip member (CRC) is an error even
  when the tar inside looked complete.

A `.conda`'s components are found by their `pkg-`/`info-` prefix, not from the file name, so a
renamed `.conda` still reads. Every failure is an `UnsafePackage` (a UsageError) naming the
package and, where there is one, the member.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import lzma
import os
import posixpath
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import zstandard

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.process_settings import MAX_BYTES_ENV, MAX_FILES_ENV, MAX_RATIO_ENV, process
from condapipe.safe_paths import open_regular

try:  # what conda-package-streaming decompresses `.conda` with (Python 3.14+: compression.zstd)
    import compression.zstd as _zstd  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the Python version
    import backports.zstd as _zstd  # type: ignore[import-not-found,no-redef]

DEFAULT_MAX_BYTES = 64 << 30
DEFAULT_MAX_FILES = 1_000_000
# Expanded bytes per byte of archive. Real packages and source tarballs compress 2-20x (a library
# of zeros-padded tables maybe 100x); a zip/zstd bomb reaches 1000s. The first RATIO_FREE_BYTES
# are free, so tiny archives of text are never refused. One bound for fix, verify and sources.
DEFAULT_MAX_RATIO = 200
RATIO_FREE_BYTES = 64 << 20
# Source archives (--source TARBALL) are trees of text: fewer members and bytes than a package.
SOURCE_MAX_BYTES = 16 << 30
SOURCE_MAX_FILES = 400_000
# PyPI wheels (condapipe wheels): mkl 2023.1's wheel expands to about 1 GB.
WHEEL_MAX_BYTES = 4 << 30
WHEEL_MAX_FILES = 200_000
_COPY_CHUNK = 1 << 20
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM})

# What the layers under a damaged package raise: zip, tar, bzip2, zstd (both bindings), EOF.
STREAM_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    tarfile.TarError,
    zstandard.ZstdError,
    _zstd.ZstdError,
    lzma.LZMAError,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    UnicodeError,
    OverflowError,
)


class UnsafePackage(UsageError):
    """A package that is damaged, or whose members would escape or harm the destination (exit 2)."""


@dataclass(frozen=True)
class Limits:
    """How much one package may expand to: bytes of file data, and members."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_files: int = DEFAULT_MAX_FILES
    max_ratio: int = DEFAULT_MAX_RATIO

    @classmethod
    def configured(cls, max_bytes: int = DEFAULT_MAX_BYTES, max_files: int = DEFAULT_MAX_FILES) -> Limits:
        """These defaults, with what the user set for the process (CONDAPIPE_MAX_UNPACK_*) in their place."""
        given = process()
        return cls(
            given.unpack_max_bytes or max_bytes,
            given.unpack_max_files or max_files,
            given.unpack_max_ratio or DEFAULT_MAX_RATIO,
        )

    @classmethod
    def for_sources(cls) -> Limits:
        return cls.configured(SOURCE_MAX_BYTES, SOURCE_MAX_FILES)

    @classmethod
    def for_wheels(cls) -> Limits:
        return cls.configured(WHEEL_MAX_BYTES, WHEEL_MAX_FILES)

    def expanded_bound(self, archive_size: int) -> int:
        """The most bytes an archive of `archive_size` bytes may expand to."""
        return min(self.max_bytes, max(RATIO_FREE_BYTES, self.max_ratio * archive_size))


class Budget:
    """One archive's members and expanded bytes, counted against its Limits as they are met.

    Every reader of an archive (package unpack, source unpack, the --source version pre-scan,
    wheels) charges each member here from its header, before reading or skipping its data: skipping
    a member of a compressed stream inflates it too, so a 1 TiB member is refused, not skipped."""

    def __init__(self, path: Path, limits: Limits, archive_size: int | None = None) -> None:
        self.path = path
        self.limits = limits
        if archive_size is None:
            try:
                archive_size = os.stat(path).st_size
            except OSError:
                archive_size = 0
        self.max_bytes = limits.expanded_bound(archive_size)
        self.files = 0
        self.bytes = 0

    def charge(self, member: str, size: int) -> None:
        """Count one member of `size` expanded bytes (0 for folders and links); UnsafePackage past a bound."""
        self.files += 1
        if self.files > self.limits.max_files:
            raise UnsafePackage(
                f"{self.path}: more than {self.limits.max_files} members "
                f"(limit; set ${MAX_FILES_ENV} to raise)"
            )
        self.bytes += max(0, size)
        if self.bytes > self.max_bytes:
            which = MAX_BYTES_ENV if self.max_bytes == self.limits.max_bytes else MAX_RATIO_ENV
            raise UnsafePackage(
                f"{self.path}: expands to more than {self.max_bytes} bytes at member "
                f"{_short(member)} (limit: {self.limits.max_ratio}x its size, at most "
                f"{self.limits.max_bytes}; set ${which} to raise)"
            )


def _short(text: str, limit: int = 200) -> str:
    """A member name for a message: at most `limit` characters (names can be 100,000 long)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def components(path: Path) -> tuple[str, ...]:
    """The components to read, in order: `.conda` holds pkg then info, `.tar.bz2` one tar."""
    return ("pkg", "info") if path.name.endswith(".conda") else ("all",)


@contextmanager
def _open_zip(path: Path) -> Iterator[zipfile.ZipFile]:
    with open_regular(path) as fh, zipfile.ZipFile(fh) as zf:
        yield zf


def _component_member(zf: zipfile.ZipFile, path: Path, component: str) -> zipfile.ZipInfo:
    found = [
        i for i in zf.infolist() if i.filename.startswith(f"{component}-") and i.filename.endswith(".tar.zst")
    ]
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise UnsafePackage(f"{path}: not a readable conda package ({what} {component}-*.tar.zst component)")
    return found[0]


@contextmanager
def _component_stream(path: Path, component: str, zf: zipfile.ZipFile | None) -> Iterator[IO[bytes]]:
    if component == "all":
        with open_regular(path) as fh, bz2.BZ2File(fh) as stream:
            yield stream  # type: ignore[misc]
        return
    assert zf is not None
    with zf.open(_component_member(zf, path, component)) as raw, _zstd.ZstdFile(raw) as stream:
        yield stream


def _drain(stream: IO[bytes]) -> None:
    """Read what follows the tar's end: checks end-of-stream markers, checksums and CRCs."""
    while stream.read(_COPY_CHUNK):
        pass


def _damaged(path: Path, exc: BaseException, what: str = "conda package") -> UnsafePackage:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UnsafePackage(
        f"{path}: not a readable {what}, damaged or truncated ({type(exc).__name__}: {detail})"
    )


def iter_members(
    path: Path, wanted: tuple[str, ...] | None = None, *, drain: bool = True, budget: Budget | None = None
) -> Generator[tuple[tarfile.TarFile, tarfile.TarInfo], None, None]:
    """Yield (tar, member) for every member of the package's components (`wanted`: default all).

    Names are checked (relative, no `..`) and every member is charged to `budget` (default: the
    package limits) before it is yielded; the caller checks types (see `SafeExtractor`). With
    `drain`, each stream is read to its end after the last member so damage is detected.
    """
    path = Path(path)
    chosen = wanted or components(path)
    budget = budget or Budget(path, Limits.configured())
    try:
        if path.name.endswith(".conda"):
            with _open_zip(path) as zf:
                for component in chosen:
                    yield from _iter_stream(path, component, zf, drain, budget)
        else:
            yield from _iter_stream(path, "all", None, drain, budget)
    except UsageError:
        raise
    except STREAM_ERRORS as exc:
        raise _damaged(path, exc) from exc


def _iter_stream(
    path: Path, component: str, zf: zipfile.ZipFile | None, drain: bool, budget: Budget
) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    with _component_stream(path, component, zf) as stream:
        with tarfile.open(fileobj=stream, mode="r|", encoding="utf-8", errors="strict") as tar:
            for member in tar:
                member.name = member_name(path, member.name)
                budget.charge(member.name, member.size if member.isreg() else 0)
                yield tar, member
        if drain:
            _drain(stream)


def member_name(path: Path, name: str) -> str:
    """The member's name, normalised; absolute names, `..` and empty names are refused."""
    if "\0" in name:
        raise UnsafePackage(f"{path}: member {name!r} has a NUL byte in its name")
    if name.startswith("/"):
        raise UnsafePackage(f"{path}: member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafePackage(f"{path}: member {name!r} leaves the package (`..`)")
    if not parts:
        raise UnsafePackage(f"{path}: member {name!r} has an empty path")
    return "/".join(parts)


def symlink_problem(rel: str, target: str) -> str | None:
    """Why a symlink at package path `rel` pointing at `target` is unsafe (None when it is fine)."""
    if not target or "\0" in target:
        return "has an empty target"
    if target.startswith("/"):
        return f"points to the absolute path {target}"
    parts = target.split("/")
    climbs = 0
    while climbs < len(parts) and parts[climbs] == "..":
        climbs += 1
    if ".." in parts[climbs:]:
        return f"has `..` in the middle of its target {target}"
    depth = len([p for p in posixpath.dirname(rel).split("/") if p])
    if climbs > depth:
        return f"points outside the package ({target})"
    return None


class SafeExtractor:
    """Writes members one by one under `dest`, enforcing the module's rules; the reader that yields
    the members charges them to `self.budget` (the limits)."""

    def __init__(self, path: Path, dest: Path, limits: Limits | None = None) -> None:
        self.path = path
        self.dest = dest
        self.limits = limits or Limits.configured()
        self.budget = Budget(path, self.limits)
        self.regular: set[str] = set()
        self._dir_modes: list[tuple[Path, int]] = []

    def _refuse(self, member: str, why: str) -> UnsafePackage:
        return UnsafePackage(f"{self.path}: member {member} {why}")

    def _parent(self, rel: str) -> Path:
        """The member's folder under dest, created as real directories (never through a symlink)."""
        current = self.dest
        for part in rel.split("/")[:-1]:
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                os.mkdir(current, 0o755)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise self._refuse(rel, f"is written through {current.relative_to(self.dest)}, not a folder")
        return current

    def _clear(self, target: Path, rel: str) -> None:
        """A repeated member replaces a file or link, never a folder."""
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise self._refuse(rel, "replaces a folder")
        os.unlink(target)
        self.regular.discard(rel)

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        rel = member.name
        if member.mode & (stat.S_ISUID | stat.S_ISGID):
            raise self._refuse(rel, "has the setuid/setgid bit")
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
            kind = {
                tarfile.CHRTYPE: "a character device",
                tarfile.BLKTYPE: "a block device",
                tarfile.FIFOTYPE: "a FIFO",
            }.get(member.type, f"an unsupported member type ({member.type!r})")
            raise self._refuse(rel, f"is {kind}")
        parent = self._parent(rel)
        target = parent / rel.rsplit("/", 1)[-1]
        if member.isdir():
            try:
                st = os.lstat(target)
            except FileNotFoundError:
                os.mkdir(target, 0o700)
            else:
                if not stat.S_ISDIR(st.st_mode):
                    raise self._refuse(rel, "is a folder over a file or link")
            self._dir_modes.append((target, (member.mode & 0o777) | 0o700))
            return
        self._clear(target, rel)
        if member.issym():
            problem = symlink_problem(rel, member.linkname)
            if problem:
                raise self._refuse(rel, f"is a symlink that {problem}")
            os.symlink(member.linkname, target)
        elif member.islnk():
            source = member_name(self.path, member.linkname)
            if source not in self.regular:
                raise self._refuse(
                    rel, f"is a hard link to {member.linkname}, not an earlier file of the package"
                )
            os.link(self.dest / source, target, follow_symlinks=False)
            self.regular.add(rel)
        else:
            self._write(tar, member, target)
            self.regular.add(rel)

    def _write(self, tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
        src = tar.extractfile(member)
        assert src is not None
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            while chunk := src.read(_COPY_CHUNK):
                out.write(chunk)
            os.fchmod(out.fileno(), member.mode & 0o755 | 0o600)

    def finish(self) -> None:
        for folder, mode in reversed(self._dir_modes):
            os.chmod(folder, mode)


def safe_extract(path: Path, dest: Path, limits: Limits | None = None) -> Path:
    """Extract every member of the package at `path` into `dest` (created) under the rules above."""
    path, dest = Path(path), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    extractor = SafeExtractor(path, dest, limits)
    try:
        for tar, member in iter_members(path, budget=extractor.budget):
            extractor.add(tar, member)
    except UsageError:
        raise
    except OSError as exc:
        if exc.errno in _WRITE_ERRNOS:  # the destination, not the package, is the problem
            raise EnvironmentProblem(f"cannot unpack {path} into {dest}: {exc.strerror}") from None
        raise _damaged(path, exc) from exc
    except STREAM_ERRORS as exc:  # raised while copying a member's data from a damaged stream
        raise _damaged(path, exc) from exc
    extractor.finish()
    return dest


class _ZipAsTar:
    """A zip file read through the tar member interface SafeExtractor takes (zip source archives)."""

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self.zf = zf
        self.infos: dict[int, zipfile.ZipInfo] = {}

    def member(self, path: Path, info: zipfile.ZipInfo) -> tarfile.TarInfo:
        mode = info.external_attr >> 16
        member = tarfile.TarInfo(member_name(path, info.filename))
        member.mode = stat.S_IMODE(mode) or (0o755 if info.is_dir() else 0o644)
        if info.is_dir():
            member.type = tarfile.DIRTYPE
        elif stat.S_ISLNK(mode):
            if info.file_size > 4096:
                raise UnsafePackage(
                    f"{path}: member {info.filename} is a symlink with a {info.file_size}-byte target"
                )
            member.type = tarfile.SYMTYPE
            member.linkname = self.zf.read(info).decode("utf-8", "surrogateescape")
        elif stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # zip writers may leave the type bits 0
            member.type = tarfile.FIFOTYPE if stat.S_ISFIFO(mode) else tarfile.CHRTYPE
        else:
            member.type = tarfile.REGTYPE
            member.size = info.file_size
        self.infos[id(member)] = info
        return member

    def extractfile(self, member: tarfile.TarInfo) -> IO[bytes]:
        return self.zf.open(self.infos[id(member)])


def source_members(path: Path, budget: Budget) -> Generator[tuple[Any, tarfile.TarInfo], None, None]:
    """(reader, member) for each member of a source archive (tar, any compression, or zip), in
    order, each charged to `budget` before it is yielded; read as a stream, never seeking back."""
    with open_regular(path) as fh:
        if zipfile.is_zipfile(fh):
            fh.seek(0)
            with zipfile.ZipFile(fh) as zf:
                reader = _ZipAsTar(zf)
                for info in zf.infolist():
                    member = reader.member(path, info)
                    budget.charge(member.name, member.size if member.isreg() else 0)
                    yield reader, member
            return
        fh.seek(0)
        with (
            _decompressed(fh) as stream,
            tarfile.open(fileobj=stream, mode="r|", encoding="utf-8", errors="strict") as tar,
        ):
            for member in tar:
                member.name = member_name(path, member.name)
                budget.charge(member.name, member.size if member.isreg() else 0)
                yield tar, member


@contextmanager
def _decompressed(fh: IO[bytes]) -> Iterator[IO[bytes]]:
    """The tar stream inside a gzip, bzip2 or xz file (or the file itself), through the readers
    that take concatenated streams: pbzip2 and pigz write release tarballs of many streams, which
    tarfile's own stream mode stops after the first of."""
    magic = fh.read(6)
    fh.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        with gzip.GzipFile(fileobj=fh) as stream:
            yield stream  # type: ignore[misc]
    elif magic.startswith(b"BZh"):
        with bz2.BZ2File(fh) as stream:
            yield stream  # type: ignore[misc]
    elif magic.startswith(b"\xfd7zXZ\x00"):
        with lzma.LZMAFile(fh) as stream:
            yield stream  # type: ignore[misc]
    else:
        yield fh


def safe_extract_source(path: Path, dest: Path, limits: Limits | None = None) -> Path:
    """Extract a source archive (tar, compressed with gzip/bzip2/xz or not, or zip) into `dest`
    under the same rules as a package, with the source limits (Limits.for_sources): no absolute
    or escaping links, no devices or FIFOs, bounded size, member count and compression ratio."""
    path, dest = Path(path), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    extractor = SafeExtractor(path, dest, limits or Limits.for_sources())
    try:
        for reader, member in source_members(path, extractor.budget):
            extractor.add(reader, member)
    except UsageError:
        raise
    except OSError as exc:
        if exc.errno in _WRITE_ERRNOS:
            raise EnvironmentProblem(f"cannot unpack {path} into {dest}: {exc.strerror}") from None
        raise _damaged(path, exc, "source archive") from exc
    except STREAM_ERRORS as exc:
        raise _damaged(path, exc, "source archive") from exc
    extractor.finish()
    return dest

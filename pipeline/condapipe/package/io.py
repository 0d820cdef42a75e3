"""Read, unpack and repack conda packages (`.conda` and `.tar.bz2`).

Unpacking goes through conda-package-streaming (the reference reader, with its path-safety
checks); repacking writes the same format in one streaming pass — tar straight into a
multi-threaded zstd stream straight into the zip member — so a 3 GB package is read once
and never held in memory. Modes, symlinks and hard links survive the round trip;
`paths.json` hashes and sizes are refreshed for the files a fix changed.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import zstandard

from condapipe.errors import BuildFailed, UsageError
from condapipe.hashing import CHUNK, FileDigest, hash_file
from condapipe.package.safe_extract import (
    STREAM_ERRORS,
    iter_members,
    member_name,
    open_regular,
    safe_extract,
)
from condapipe.value_rules import check_package_part

CONDA = ".conda"
TAR_BZ2 = ".tar.bz2"
PACKAGE_SUFFIXES: tuple[str, ...] = (CONDA, TAR_BZ2)
DEFAULT_ZSTD_LEVEL = 19

# What a damaged or truncated package raises while it is streamed (zip, tar, bzip2, zstd through
# zstandard and backports.zstd / compression.zstd, EOF): condapipe.package.safe_extract reads every
# package and turns these into one-line errors; the tuple stays for callers that use other readers
# (anaconda-client's inspector). LookupError: a component the file name implies is missing.
READ_ERRORS: tuple[type[Exception], ...] = (*STREAM_ERRORS, LookupError)


def package_suffix(filename: str) -> str | None:
    """The conda package extension of a file name, or None when it is not a conda package."""
    return next((s for s in PACKAGE_SUFFIXES if filename.endswith(s)), None)


def package_format(path: Path | str) -> str:
    """Return ".conda" or ".tar.bz2"; anything else is a usage error."""
    suffix = package_suffix(str(path))
    if suffix is None:
        raise UsageError(f"{path}: not a conda package (expected .conda or .tar.bz2)")
    return suffix


def package_file(path: Path | str) -> Path:
    """`path` checked before it is opened: a conda package name, and a regular file (FIFOs hang)."""
    path = Path(path)
    package_format(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise UsageError(f"{path}: no such package") from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path}: not a regular file")
    return path


def package_stem(path: Path | str) -> str:
    """`name-version-build` (the file name without its extension)."""
    name = Path(path).name
    return name[: -len(package_format(name))]


_INFO_MAX = 64 << 20  # an info/ file larger than this is not metadata


def _unreadable(path: Path, exc: BaseException) -> UsageError:
    return UsageError(f"{path}: not a readable conda package ({type(exc).__name__}: {exc})")


# -- reading ------------------------------------------------------------------------------


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


def read_info_file(path: Path | str, member: str) -> bytes:
    """One file of the package's `info/` folder, read without unpacking the package."""
    path = package_file(path)
    wanted = ("info",) if package_format(path) == CONDA else None
    members = iter_members(path, wanted, drain=False)  # info/ only: the rest is checked on unpack
    try:
        for tar, entry in members:
            if entry.name == member:
                extracted = tar.extractfile(entry) if entry.isreg() else None
                if extracted is None:
                    break
                data = extracted.read(_INFO_MAX + 1)
                if len(data) > _INFO_MAX:
                    raise UsageError(f"{path}: {member} is larger than {_INFO_MAX >> 20} MiB")
                return data
    except UsageError:
        raise
    except READ_ERRORS as exc:
        raise _unreadable(path, exc) from exc
    finally:
        members.close()
    raise UsageError(f"{path}: package has no {member}")


def info_names(path: Path | str, under: str = "info/") -> list[str]:
    """Names of the regular files under `under` in the package's info/ folder (one pass, no unpack)."""
    path = package_file(path)
    wanted = ("info",) if package_format(path) == CONDA else None
    members = iter_members(path, wanted, drain=False)
    try:
        return sorted(entry.name for _tar, entry in members if entry.isreg() and entry.name.startswith(under))
    except READ_ERRORS as exc:
        raise _unreadable(path, exc) from exc
    finally:
        members.close()


def read_index(path: Path | str) -> dict[str, Any]:
    """`info/index.json` of a package file: name, version, build, depends, subdir."""
    return _parse_index(read_info_file(path, "info/index.json"), path)


def load_index(root: Path, shown: Path | None = None) -> dict[str, Any]:
    """`info/index.json` of an unpacked package folder (messages name `shown`, else the folder)."""
    index_file = root / "info" / "index.json"
    if not index_file.is_file():
        raise UsageError(f"{shown or root}: not a conda package (no info/index.json)")
    with open_regular(index_file) as fh:
        return _parse_index(fh.read(_INFO_MAX + 1), shown or root)


def _parse_index(raw: bytes, where: Path | str) -> dict[str, Any]:
    try:
        index = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise UsageError(f"{where}: info/index.json is not valid JSON") from exc
    if not isinstance(index, dict):
        raise UsageError(f"{where}: info/index.json is not a JSON object")
    return index


def read_package_info(path: Path | str) -> PackageInfo:
    """Identity, subdir and dependencies of a package file, from its `info/index.json`."""
    path = Path(path)
    return package_info_from_index(read_index(path), path)


def package_info_from_index(index: dict[str, Any], path: Path) -> PackageInfo:
    """The checked identity in an `info/index.json`: every field a channel turns into a file name."""
    if not all(isinstance(index.get(k), str) for k in ("name", "version")):
        raise UsageError(f"{path}: info/index.json lacks name/version")
    subdir = index.get("subdir") or ("noarch" if index.get("arch") is None else None)
    if not subdir:
        raise UsageError(f"{path}: info/index.json has no subdir")
    build_number = index.get("build_number", 0)
    if isinstance(build_number, bool) or not isinstance(build_number, int) or not 0 <= build_number < 2**31:
        raise UsageError(f"{path}: info/index.json has a build_number that is not a number")
    build = str(index.get("build", "0"))
    depends = index.get("depends") or []
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        raise UsageError(f"{path}: info/index.json depends is not a list of strings")
    # These become file names in a channel: held to value_rules, as a name or version a user types.
    for key, value in (("name", index["name"]), ("version", index["version"]), ("build", build)):
        check_package_part(f"package_{key}", value, f"{path}: info/index.json {key}")
    if not isinstance(subdir, str) or not _SAFE_SUBDIR.fullmatch(subdir):
        raise UsageError(f"{path}: info/index.json subdir {subdir!r} is not a platform subdir")
    return PackageInfo(
        path=path,
        name=index["name"],
        version=index["version"],
        build=build,
        build_number=build_number,
        subdir=subdir,
        depends=tuple(depends),
    )


_SAFE_SUBDIR = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")


def unpack(path: Path | str, dest: Path | str) -> Path:
    """Extract every member of the package into `dest` (created) under condapipe.package.safe_extract's
    rules (no member leaves `dest`, only files, folders and links, bounded size); returns `dest`."""
    return safe_extract(package_file(path), Path(dest))


# -- hashing and paths.json ---------------------------------------------------------------


def load_paths_json(root: Path) -> dict[str, Any]:
    """`info/paths.json`, checked: a list of entries whose `_path` stays inside the package."""
    pj = root / "info" / "paths.json"
    if not pj.is_file():
        raise UsageError(f"{root}: package has no info/paths.json")
    try:
        with open_regular(pj) as fh:
            data = json.loads(fh.read())
    except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
        raise UsageError(f"{root}: info/paths.json is not valid JSON") from None
    paths = data.get("paths") if isinstance(data, dict) else None
    if not isinstance(paths, list) or not all(
        isinstance(e, dict) and isinstance(e.get("_path"), str) for e in paths
    ):
        raise UsageError(f"{root}: info/paths.json has no list of entries with a `_path`")
    for entry in paths:
        if member_name(root, entry["_path"]) != entry["_path"]:
            raise UsageError(f"{root}: info/paths.json lists {entry['_path']!r}, not a package path")
    return data


def update_paths_json(
    root: Path,
    changed: Iterable[str],
    added: Iterable[str] = (),
    digests: dict[str, FileDigest] | None = None,
) -> None:
    """Refresh sha256/size of `changed` files and add entries for `added` ones.

    `digests` may carry hashes already computed (by the workers that patched the files).
    Also keeps `info/files` in step. Both files are written atomically.
    """
    digests = dict(digests or {})
    data = load_paths_json(root)
    entries = {e["_path"]: e for e in data["paths"]}
    for rel in (*changed, *added):
        if rel not in digests:
            digests[rel] = hash_file(root / rel)
    for rel in changed:
        if rel in entries:
            entries[rel]["sha256"], entries[rel]["size_in_bytes"] = digests[rel].sha256, digests[rel].size
    for rel in added:
        full = root / rel
        entry: dict[str, Any] = {"_path": rel}
        if full.is_symlink():
            entry["path_type"] = "softlink"
        else:
            entry["path_type"] = "hardlink"
        entry["sha256"], entry["size_in_bytes"] = digests[rel].sha256, digests[rel].size
        entries[rel] = entry
    data["paths"] = sorted(entries.values(), key=lambda e: e["_path"])
    write_atomic(root / "info" / "paths.json", json.dumps(data, indent=2, sort_keys=True).encode() + b"\n")
    files = root / "info" / "files"
    if files.is_file() or added:
        listed = files.read_text().splitlines() if files.is_file() else []
        merged = list(dict.fromkeys([*listed, *added]))
        write_atomic(files, ("\n".join(merged) + "\n").encode())


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to a temporary sibling and rename it over `path`."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# -- packing ------------------------------------------------------------------------------


_MEMINFO = Path("/proc/meminfo")
_MEMORY_SHARE = 4  # the compressor may take a quarter of the memory available when it starts
_MEMORY_FLOOR_MIB = 512  # what a small or unreadable machine still gets (lean workers fit in it)


def machine_memory_bound_mib(meminfo: Path = _MEMINFO) -> int:
    """The compressor's default memory bound: a share of the memory available now (MemAvailable;
    MemTotal where the kernel has none), never under the floor. A 64-core machine with 500 GiB gets
    standard tables on every core; a small one stays within its bound with lean workers."""
    try:
        with meminfo.open("rb") as fh:  # /proc/meminfo is small; a bounded read
            text = fh.read(16384).decode("ascii", "replace")
    except OSError:
        return _MEMORY_FLOOR_MIB
    fields = dict(re.findall(r"^(\w+):\s+(\d+) kB", text, re.MULTILINE))
    kib = fields.get("MemAvailable") or fields.get("MemTotal")
    if not kib:
        return _MEMORY_FLOOR_MIB
    return max(_MEMORY_FLOOR_MIB, int(kib) // 1024 // _MEMORY_SHARE)


@dataclass(frozen=True)
class PackOptions:
    """Compression settings; level 19 is conda-build's default, threads 0 means all cores.

    Every zstd worker holds its own match tables and job buffers (about 140 MiB at level 19),
    so `max_memory_mib` bounds the workers: 16 standard workers would need over 2 GiB. When the
    standard tables leave cores idle under the bound, the workers use smaller match tables and
    jobs instead (about 46 MiB each at level 19; ~1-1.5 % larger output), so a many-core machine still
    compresses on every core within the bound. The bound comes from the machine (a quarter of the
    memory available, machine_memory_bound_mib); 0 lifts it (standard tables, all cores).
    """

    zstd_level: int = DEFAULT_ZSTD_LEVEL
    threads: int = 0
    bz2_level: int = 9
    max_memory_mib: int = field(default_factory=machine_memory_bound_mib)

    def _wanted(self) -> int:
        return self.threads if self.threads > 0 else (os.cpu_count() or 1)

    def _fits(self, lean: bool) -> int:
        return max(1, (self.max_memory_mib - _BASE_MIB) // zstd_worker_mib(self.zstd_level, lean=lean))

    def lean_tables(self) -> bool:
        """True when the memory bound would leave cores idle with the level's standard tables."""
        if self.max_memory_mib <= 0:
            return False
        wanted = self._wanted()
        return self._fits(lean=False) < wanted and self._fits(lean=True) > self._fits(lean=False)

    def engine_threads(self) -> int:
        """Compression threads for an engine packing at this level: every core, as many as fit the
        memory bound with the level's standard tables (an engine's compressor has no lean variant)."""
        wanted = self._wanted()
        return wanted if self.max_memory_mib <= 0 else max(1, min(wanted, self._fits(lean=False)))

    def zstd_threads(self) -> int:
        wanted = self._wanted()
        if self.max_memory_mib <= 0:
            return wanted
        return max(1, min(wanted, self._fits(lean=self.lean_tables())))

    def zstd_parameters(self) -> zstandard.ZstdCompressionParameters:
        """The compressor's parameters: the level's own, or its lean variant (see the class doc)."""
        threads = self.zstd_threads()
        if not self.lean_tables():
            return zstandard.ZstdCompressionParameters.from_level(self.zstd_level, threads=threads)
        return _lean_parameters(self.zstd_level, threads)


_BASE_MIB = 256  # interpreter, tar and zip buffers, zstd job queue (measured: 232 MiB at level 19)
# Lean workers: match tables capped at 2^22 chain / 2^20 hash entries and 8 MiB jobs. Measured
# with 16 workers on ELF data at level 19: 532 MiB peak instead of ~2 GiB, output +1.5 %.
_LEAN_CHAIN_LOG = 22
_LEAN_HASH_LOG = 20
_LEAN_JOB_BYTES = 8 << 20
# Each job re-reads the tail of the previous one into its match finder. zstd's default for level 19
# is a whole window (8 MiB) per 8 MiB job, which doubles the match-finding work; 2^6/2^9 of the
# window (1 MiB) measured 1.4x faster for +1.0 % output (64 MiB of bench/fix_bench.py data, level
# 19): at 3.4 GB on 16 cores the default overlap had only matched `zstd -T0 -19` (0.99x).
_LEAN_OVERLAP_LOG = 6


def _lean_parameters(level: int, threads: int) -> zstandard.ZstdCompressionParameters:
    std = zstandard.ZstdCompressionParameters.from_level(level)
    return zstandard.ZstdCompressionParameters(
        window_log=std.window_log,
        chain_log=min(std.chain_log, _LEAN_CHAIN_LOG),
        hash_log=min(std.hash_log, _LEAN_HASH_LOG),
        search_log=std.search_log,
        min_match=std.min_match,
        target_length=std.target_length,
        strategy=std.strategy,
        threads=threads,
        job_size=_LEAN_JOB_BYTES if threads > 1 else 0,
        overlap_log=_LEAN_OVERLAP_LOG if threads > 1 else 0,
    )


def zstd_worker_mib(level: int, *, lean: bool = False) -> int:
    """Memory of one zstd worker: its context plus input, output and overlap buffers."""
    if lean:
        params = _lean_parameters(level, threads=0)
        window = 1 << params.window_log  # the overlap each job carries from the previous one
        return (params.estimated_compression_context_size() + 2 * _LEAN_JOB_BYTES + window) // (1 << 20) + 1
    params = zstandard.ZstdCompressionParameters.from_level(level)
    window = 1 << params.window_log
    return (params.estimated_compression_context_size() + 7 * window) // (1 << 20) + 1


def member_list(root: Path) -> tuple[list[str], list[str]]:
    """(info members, other members) relative to `root`, sorted; directories only when empty."""
    info: list[str] = []
    other: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        names = list(filenames)
        # symlinks to directories are members, not folders to descend into
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                names.append(d)
                dirnames.remove(d)
        if rel_dir != "." and not names and not dirnames:
            names = [""]  # keep the empty directory itself
        for name in sorted(names):
            rel = os.path.normpath(os.path.join(rel_dir, name)) if name else rel_dir
            (info if rel == "info" or rel.startswith("info/") else other).append(rel)
    return sorted(info), sorted(other)


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Owner-neutral members (conda packages carry no build-machine users)."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


Progress = Callable[[int, int], None]  # (bytes just added, total bytes)


def _add_all(
    tar: tarfile.TarFile, root: Path, members: list[str], progress: Progress | None, total: int
) -> None:
    tar.copybufsize = CHUNK  # type: ignore[attr-defined]  # TarFile's copy buffer; typeshed omits it
    for rel in members:
        tar.add(root / rel, arcname=rel, recursive=False, filter=_normalise)
        if progress is not None:
            progress(_member_bytes(root / rel), total)


def _member_bytes(path: Path) -> int:
    st = path.lstat()
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def pack(
    root: Path, out_path: Path, options: PackOptions | None = None, *, progress: Progress | None = None
) -> Path:
    """Pack the unpacked package at `root` into `out_path` (format from its name), atomically.

    `progress`, when given, is called after each member with its size and the total, so a
    caller can show how far a multi-minute level-19 compression has come.
    """
    options = options or PackOptions()
    fmt = package_format(out_path)
    info, other = member_list(root)
    if "info/index.json" not in info:
        raise UsageError(f"{root}: not an unpacked package (no info/index.json)")
    total = sum(_member_bytes(root / rel) for rel in (*info, *other)) if progress else 0
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp-{os.getpid()}")
    try:
        if fmt == CONDA:
            _pack_conda(root, tmp, package_stem(out_path), (info, other), options, (progress, total))
        else:
            with tarfile.open(
                tmp, "w:bz2", compresslevel=options.bz2_level, format=tarfile.PAX_FORMAT
            ) as tar:
                _add_all(tar, root, [*info, *other], progress, total)  # info/ first: found early
        os.replace(tmp, out_path)
    except OSError as exc:
        raise BuildFailed(f"cannot write {out_path}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return out_path


def _pack_conda(
    root: Path,
    out: Path,
    stem: str,
    members: tuple[list[str], list[str]],
    options: PackOptions,
    report: tuple[Progress | None, int],
) -> None:
    # Same layout as conda-package-handling: metadata.json, the pkg component, then info.
    info, other = members
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        for component, names in (("pkg", other), ("info", info)):
            zinfo = zipfile.ZipInfo(f"{component}-{stem}.tar.zst", date_time=(1980, 1, 1, 0, 0, 0))
            zinfo.external_attr = (stat.S_IFREG | 0o644) << 16
            cctx = zstandard.ZstdCompressor(compression_params=options.zstd_parameters())
            with (
                zf.open(zinfo, "w", force_zip64=True) as raw,
                cctx.stream_writer(raw, closefd=False) as zw,
                tarfile.TarFile(fileobj=zw, mode="w", format=tarfile.PAX_FORMAT) as tar,
            ):
                _add_all(tar, root, names, *report)


def recompress(
    path: Path,
    out_path: Path,
    options: PackOptions | None = None,
    *,
    progress: Progress | None = None,
    info_files: dict[str, bytes] | None = None,
    payload: bool = True,
) -> Path:
    """Rewrite a `.conda` with its tar streams byte for byte unchanged (nothing unpacked).

    `payload` True: both components are decompressed and compressed again at `options`' level (a
    package packed at another level than the one asked for). `payload` False: the pkg component's
    zstd stream is copied as the engine compressed it — never decompressed — and only the info
    component is rewritten, when `info_files` (name -> bytes) replace some of its members
    (condapipe.package.info_records). Written atomically, like `pack`; `progress` gets compressed
    bytes read and their total.
    """
    options = options or PackOptions()
    path = package_file(path)
    if package_format(path) != CONDA or package_format(out_path) != CONDA:
        raise UsageError(f"{path}: only a .conda package can be recompressed into a .conda")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp-{os.getpid()}")
    try:
        with open_regular(path) as fh, zipfile.ZipFile(fh) as src:
            streams = [i for i in src.infolist() if i.filename.endswith(".tar.zst")]
            if not payload:
                streams = [i for i in streams if i.filename.startswith("info-") and info_files]
            total = sum(i.compress_size for i in streams)
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as dst:
                for item in src.infolist():
                    zinfo = zipfile.ZipInfo(item.filename, date_time=item.date_time)
                    zinfo.external_attr = item.external_attr
                    with src.open(item) as raw, dst.open(zinfo, "w", force_zip64=True) as out:
                        if item in streams and info_files and item.filename.startswith("info-"):
                            _transcode_info(raw, out, options, info_files)
                        elif item in streams:
                            _transcode(raw, out, options, progress, total)
                        else:
                            shutil.copyfileobj(raw, out, CHUNK)
        os.replace(tmp, out_path)
    except UsageError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM):
            raise BuildFailed(f"cannot write {out_path}: {exc}") from exc
        raise _unreadable(path, exc) from exc
    except READ_ERRORS as exc:
        raise _unreadable(path, exc) from exc
    finally:
        tmp.unlink(missing_ok=True)
    return out_path


def _transcode(
    raw: IO[bytes], out: IO[bytes], options: PackOptions, progress: Progress | None, total: int
) -> None:
    """One zstd stream decompressed and compressed again at `options`' level (checksums checked)."""
    # _Counting is a raw binary reader: a file object of bytes to zstandard.
    counted = cast(IO[bytes], _Counting(raw, progress, total)) if progress else raw
    reader = zstandard.ZstdDecompressor().stream_reader(counted, read_across_frames=True, closefd=False)
    cctx = zstandard.ZstdCompressor(compression_params=options.zstd_parameters())
    with cctx.stream_writer(out, closefd=False) as writer:
        while chunk := reader.read(CHUNK * 16):
            writer.write(chunk)


def _transcode_info(raw: IO[bytes], out: IO[bytes], options: PackOptions, replace: dict[str, bytes]) -> None:
    """The info tar decompressed, the members named in `replace` given their new bytes (every other
    member and every header field kept), and compressed again at `options`' level."""
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)
    cctx = zstandard.ZstdCompressor(compression_params=options.zstd_parameters())
    with (
        cctx.stream_writer(out, closefd=False) as writer,
        tarfile.open(fileobj=reader, mode="r|") as src,
        tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as dst,
    ):
        for member in src:
            data = src.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.isfile() and member.name in replace:
                data = replace[member.name]
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)


class _Counting(io.RawIOBase):
    """A reader that reports the bytes read through it (recompress's progress)."""

    def __init__(self, raw: IO[bytes], progress: Progress, total: int) -> None:
        self.raw, self.progress, self.total = raw, progress, total

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        buffer[: len(data)] = data
        if data:
            self.progress(len(data), self.total)
        return len(data)

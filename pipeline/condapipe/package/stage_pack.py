"""Write the `.conda` from the staged payload and the engine's info-only package (pack_from_stage).

Why (issue 35): the payload is read once and compressed once, at the final level, on every core
the memory bound allows: tar, sha256, prefix scan and zstd in one streaming pass, as the floor
`tar | zstd -T0` does. The engine packed only its metadata (condapipe.fix.stage_out moved the
payload out of its prefix); its info/ files are kept byte for byte (but for the records that
name condapipe's work dir, condapipe.package.info_records), and paths.json gets one entry
per payload file made by rattler-build 0.73's rules (packaging/metadata.rs `paths_json`,
`create_prefix_placeholder`; file_finder.rs `content_type`): sha256 and size; a prefix placeholder
where the staged prefix's path occurs (text mode for UTF-8 files, binary otherwise; none for .pyc
and .pyo); symlinks made relative when they point into the prefix, hashed by their target's
content when that is a file of the package. What condapipe does not reproduce (noarch python,
.pyc compilation and entry points, build.files, prefix_detection, always_copy_files,
post_process) is refused with one line: the recipe is then built with the engine packing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import time
import zipfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import zstandard

from condapipe.errors import UsageError
from condapipe.hashing import hash_file
from condapipe.package import pass_record, tree_record
from condapipe.package.info_records import rewrite_records
from condapipe.package.io import PackOptions, machine_memory_bound_mib
from condapipe.package.pass_record import PassRecord
from condapipe.package.stage_layout import FIX_RECORD, PAYLOAD, PREFIX_FILE

CHUNK = 1 << 20
# a write within this long of the pass's start may keep a file's ctime (pass_record's tick)
_TICK_NS = pass_record.TICK_NS
# rendered_recipe.yaml keys under `build:` whose effect on the payload condapipe does not reproduce
_UNSUPPORTED_BUILD_KEYS = ("files", "always_include_files", "always_copy_files", "post_process")
# of build.prefix_detection, only ignore_binary_files (condapipe's own recipes set it) is reproduced
_SUPPORTED_PREFIX_DETECTION = ("ignore_binary_files",)
# content_inspector's byte-order marks (UTF-32 before UTF-16: FF FE 00 00 starts with FF FE)
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-bom"),
    (b"\xff\xfe\x00\x00", "utf-32le"),
    (b"\x00\x00\xfe\xff", "utf-32be"),
    (b"\xff\xfe", "utf-16le"),
    (b"\xfe\xff", "utf-16be"),
)


def content_kind(head: bytes) -> str:
    """content_inspector::inspect on a file's first 1024 bytes: a BOM's encoding, else binary
    when a NUL byte occurs, else utf-8."""
    for bom, kind in _BOMS:
        if head.startswith(bom):
            return kind
    return "binary" if b"\x00" in head else "utf-8"


@dataclass(frozen=True)
class _Scan:
    """What reading one payload file learned: its sha256 (hex), size, first 1024 bytes, whether it
    holds the prefix, and the file's identity when the read began (None: read by the packing tar)."""

    sha256: str
    size: int
    head: bytes
    found: bool
    identity: tuple[int, int, int, int] | None = None


class _Scanner:
    """sha256, size, head and prefix search over a file's bytes, fed in order, chunk by chunk.
    The search keeps the prefix's length less one byte of the previous chunk, so an occurrence
    across two chunks is found without joining them."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix, self.sha256 = prefix, hashlib.sha256()
        self.size, self.head, self.found, self.tail = 0, b"", False, b""

    def update(self, data: bytes) -> None:
        self.sha256.update(data)
        if len(self.head) < 1024:
            self.head += data[: 1024 - len(self.head)]
        keep = len(self.prefix) - 1
        if not self.found:
            self.found = self.prefix in data or (keep > 0 and self.prefix in self.tail + data[:keep])
            if keep <= 0:
                self.tail = b""
            elif len(data) >= keep:
                self.tail = data[-keep:]
            else:
                self.tail = (self.tail + data)[-keep:]
        self.size += len(data)

    def result(self, identity: tuple[int, int, int, int] | None = None) -> _Scan:
        return _Scan(self.sha256.hexdigest(), self.size, self.head, self.found, identity)


class _ScanningReader(io.RawIOBase):
    """A reader that hashes, measures and searches for the prefix what the tar reads through it
    (a file changed just before the pass: its scan must be of the very bytes packed)."""

    def __init__(self, raw: IO[bytes], prefix: bytes) -> None:
        self.raw, self.scanner = raw, _Scanner(prefix)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        self.scanner.update(data)
        buffer[: len(data)] = data
        return len(data)


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What any write to a file changes (size, mtime, ctime) and what a replacement changes (inode)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _scan_file(path: Path, prefix: bytes) -> _Scan:
    """Read one payload file beside the tar (a scan thread): its scan, with the file's identity
    when that was the same before and after the read."""
    with path.open("rb", buffering=0) as fh:
        before = _identity(os.fstat(fh.fileno()))
        scanner = _Scanner(prefix)
        while chunk := fh.read(CHUNK):
            scanner.update(chunk)
        after = _identity(os.fstat(fh.fileno()))
    return scanner.result(before if after == before else None)  # None: changed while it was read


def _scan_threads() -> int:
    """Scan threads: one per 8 cores, 1 to 8 (each hashes ~1 GB/s; zstd's workers take the rest)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores // 8))


def _placeholder(rel: str, scan: _Scan, prefix: str, ignore_binary: bool) -> dict[str, str]:
    if rel.endswith((".pyc", ".pyo")) or not scan.found:
        return {}
    mode = "text" if content_kind(scan.head) in ("utf-8", "utf-8-bom") else "binary"
    if mode == "binary" and ignore_binary:
        return {}
    return {"file_mode": mode, "prefix_placeholder": prefix}


def _members(payload: Path) -> list[str]:
    """Files and symlinks below `payload`, relative, sorted (the engine packs no directory)."""
    out: list[str] = []
    for dirpath, dirnames, names in os.walk(payload):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if d not in links]
        rel_dir = Path(dirpath).relative_to(payload)
        out.extend((rel_dir / n).as_posix() for n in [*names, *links])
    return sorted(out)


def _relative_link(path: Path, target: str, payload: Path, prefix: str) -> str:
    """rattler-build's rule: an absolute link into the prefix becomes relative to its folder."""
    if os.path.isabs(target) and (target == prefix or target.startswith(prefix.rstrip("/") + "/")):
        rel_parent = path.parent.relative_to(payload)
        return os.path.relpath(target, os.path.join(prefix, rel_parent))
    return target


def _link_digest(path: Path, payload: Path) -> str:
    """sha256 of a symlink's target when it resolves to a file inside the package, else of nothing."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return hashlib.sha256(b"").hexdigest()
    if not real.is_file() or not real.is_relative_to(payload.resolve()):
        return hashlib.sha256(b"").hexdigest()
    digest = hashlib.sha256()
    with real.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_payload(
    payload: Path,
    prefix: str,
    members: list[str],
    out: IO[bytes],
    options: PackOptions,
    mtime: int,
    ignore_binary: bool,
) -> list[dict[str, Any]]:
    """The pkg tar, streamed through zstd into `out`; the paths.json entries of its members.

    This thread only tars and feeds zstd, as the floor's `tar` does (with 64 zstd workers, level
    19 wants ~2 GB queued before all are busy): scan threads read every file ahead of it (its
    sha256, size, head, prefix), at most a memory bound ahead (so the tar reads it again from the
    page cache). A file's scan counts only when the file is the same (size, mtime, ctime, inode)
    when the pass listed it, before and after the scan read it, when the tar began it and after
    the tar read it; otherwise the pass stops with "changed while it was packed". A file changed
    shortly before the pass (within a timestamp tick of its start, where a later write could keep
    its ctime) is scanned by the tar itself, through the bytes it packs, as every file was before."""
    entries: list[dict[str, Any]] = []
    pending: list[tuple[int, str, tuple[int, int, int, int], Future[_Scan]]] = []
    compressor = zstandard.ZstdCompressor(compression_params=options.zstd_parameters())
    needle = prefix.encode()
    started_ns = time.time_ns()
    window = machine_memory_bound_mib() << 20
    files = [(rel, os.lstat(payload / rel)) for rel in members]
    pool = ThreadPoolExecutor(max_workers=_scan_threads(), thread_name_prefix="stage-scan")
    try:
        scans: dict[str, Future[_Scan]] = {}
        ahead, queued, packed = 0, 0, 0  # next file to scan; bytes scanned or queued; bytes packed

        def scan_ahead() -> None:
            nonlocal ahead, queued
            while ahead < len(files) and queued <= packed + window:
                rel, st = files[ahead]
                ahead += 1
                if stat.S_ISREG(st.st_mode) and st.st_ctime_ns < started_ns - _TICK_NS:
                    scans[rel] = pool.submit(_scan_file, payload / rel, needle)
                    queued += st.st_size

        # tarfile's plain writer ("w", not the stream "w|": its 10 KiB record buffer copies
        # every MiB ~100 times); the same bytes: the records are padded the same way on close
        with (
            compressor.stream_writer(out, closefd=False) as zst,
            tarfile.open(fileobj=zst, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            tar.copybufsize = CHUNK  # type: ignore[attr-defined]  # CPython's; typeshed does not list it
            for rel, listed in files:
                scan_ahead()
                path = payload / rel
                st = path.lstat()
                if rel in scans and _identity(st) != _identity(listed):  # rewritten, or now a link
                    raise UsageError(f"{rel}: changed while it was packed")
                info = tarfile.TarInfo(rel)
                info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = (
                    stat.S_IMODE(st.st_mode),
                    mtime,
                    0,
                    0,
                    "",
                    "",
                )
                if stat.S_ISLNK(st.st_mode):
                    target = _relative_link(path, os.readlink(path), payload, prefix)
                    if target != os.readlink(path):
                        path.unlink()
                        path.symlink_to(target)
                    info.type, info.linkname = tarfile.SYMTYPE, target
                    tar.addfile(info)
                    entries.append(
                        {
                            "_path": rel,
                            "path_type": "softlink",
                            "sha256": _link_digest(path, payload),
                            "size_in_bytes": len(os.fsencode(target)),
                        }
                    )
                    continue
                if not stat.S_ISREG(st.st_mode):
                    raise UsageError(f"{rel}: neither a file nor a symlink; pack_from_stage packs only those")
                info.size = st.st_size
                ahead_scan = scans.pop(rel, None)
                with path.open("rb") as raw:
                    if ahead_scan is None:
                        reader = _ScanningReader(raw, needle)
                        tar.addfile(info, io.BufferedReader(reader, CHUNK))
                        inline: _Scan | None = reader.scanner.result()
                    else:
                        tar.addfile(info, raw)
                        inline = None
                    after = _identity(os.fstat(raw.fileno()))
                packed += st.st_size
                unchanged = after == _identity(st) and (
                    inline.size == st.st_size if inline is not None else after == _identity(listed)
                )
                if not unchanged:
                    raise UsageError(f"{rel}: changed while it was packed")
                if inline is not None:
                    entries.append(_file_entry(rel, inline, prefix, ignore_binary))
                else:
                    assert ahead_scan is not None
                    pending.append((len(entries), rel, after, ahead_scan))
                    entries.append({})
        for index, rel, identity, future in pending:  # the scans ran beside the tar: all but done
            try:
                scan = future.result()
            except OSError as exc:
                raise UsageError(f"{rel}: changed while it was packed ({exc.strerror})") from None
            if scan.identity != identity:
                raise UsageError(f"{rel}: changed while it was packed")
            entries[index] = _file_entry(rel, scan, prefix, ignore_binary)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # on a refusal, no scan left reading
    return entries


def _file_entry(rel: str, scan: _Scan, prefix: str, ignore_binary: bool) -> dict[str, Any]:
    return {
        "_path": rel,
        "path_type": "hardlink",
        **_placeholder(rel, scan, prefix, ignore_binary),  # rattler's field order: before the digest
        "sha256": scan.sha256,
        "size_in_bytes": scan.size,
    }


def _read_engine_package(
    package: Path,
) -> tuple[list[zipfile.ZipInfo], dict[str, bytes], list[tuple[tarfile.TarInfo, bytes]]]:
    """The engine's zip entries, their small members' bytes, and its info tar's members."""
    with zipfile.ZipFile(package) as z:
        infos = z.infolist()
        small = {
            i.filename: z.read(i)
            for i in infos
            if i.filename.startswith("info-") or i.filename == "metadata.json"
        }
    info_name = next((n for n in small if n.startswith("info-")), None)
    if info_name is None:
        raise UsageError(f"{package}: no info-*.tar.zst")
    members: list[tuple[tarfile.TarInfo, bytes]] = []
    raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(small[info_name]))
    with tarfile.open(fileobj=raw, mode="r|") as tar:
        for m in tar:
            f = tar.extractfile(m) if m.isfile() else None
            members.append((m, f.read() if f else b""))
    return infos, small, members


def _refuse_unsupported(
    members: list[tuple[tarfile.TarInfo, bytes]], package: Path
) -> tuple[dict[str, Any], bool]:
    """The engine's paths.json and whether binary files are left out of the prefix scan, after
    checking the package is one condapipe can complete."""
    from ruamel.yaml import YAML

    files = {m.name: data for m, data in members}
    index = json.loads(files["info/index.json"])
    paths = json.loads(files["info/paths.json"])
    if paths.get("paths"):
        names = ", ".join(p["_path"] for p in paths["paths"][:3])
        raise UsageError(
            f"{package.name}: the engine packed payload files ({names}); pack_from_stage cannot merge them"
        )
    if index.get("noarch"):
        raise UsageError(
            f"{package.name}: noarch: packed by the engine (pack_from_stage does not map noarch paths)"
        )
    rendered = YAML(typ="safe").load(files.get("info/recipe/rendered_recipe.yaml", b"{}")) or {}
    build = ((rendered.get("recipe") or {}).get("build")) or {}
    used = [k for k in _UNSUPPORTED_BUILD_KEYS if build.get(k)]
    if used:
        raise UsageError(f"{package.name}: build.{used[0]} is set; pack_from_stage does not reproduce it")
    detection = build.get("prefix_detection") or {}
    other = [k for k, v in detection.items() if v and k not in _SUPPORTED_PREFIX_DETECTION]
    if other:
        raise UsageError(
            f"{package.name}: build.prefix_detection.{other[0]} is set; pack_from_stage does not reproduce it"
        )
    return paths, bool(detection.get("ignore_binary_files"))


def pack_from_stage(
    package: Path,
    stage: Path,
    options: PackOptions,
    records_work_dir: Path | None = None,
    *,
    keep_tree: bool = False,
) -> Path:
    """Replace the engine's info-only `package` with one holding `stage`'s payload (temp, rename).
    `records_work_dir` (condapipe's work dir): the info records stop naming it as they are written
    (condapipe.package.info_records), as the fix step would otherwise rewrite them. `keep_tree`:
    the payload just packed, with the info files written beside it, stays beside the package as
    its unpacked tree (condapipe.package.tree_record), so that verify reads it instead of
    unpacking the package (the plan's fix step hands it on with the package it places)."""
    payload = stage / PAYLOAD
    prefix = (stage / PREFIX_FILE).read_text(encoding="utf-8")
    infos, small, members = _read_engine_package(package)
    paths, ignore_binary = _refuse_unsupported(members, package)
    if records_work_dir is not None:
        replaced = rewrite_records({m.name: data for m, data in members if m.isfile()}, records_work_dir)
        members = [(m, replaced.get(m.name, data)) for m, data in members]
    index = json.loads(next(d for m, d in members if m.name == "info/index.json"))
    mtime = int(index.get("timestamp") or 0) // 1000
    names = _members(payload) if payload.is_dir() else []
    if any(n.endswith(".pyc") for n in names):
        raise UsageError(
            f"{package.name}: .pyc files in the payload (pack_from_stage does not apply the .pyc filter)"
        )
    entries: list[dict[str, Any]] = []
    new_paths = b""
    tmp = package.with_name(f".{package.name}.stage-{os.getpid()}")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
            # the payload first: paths.json, in the info tar, is made while it streams
            for entry in sorted(infos, key=lambda e: (not e.filename.startswith("pkg-"), e.filename)):
                if entry.filename.startswith("pkg-"):
                    with z.open(_copy_entry(entry), "w", force_zip64=True) as out:
                        entries = _write_payload(payload, prefix, names, out, options, mtime, ignore_binary)
                elif entry.filename.startswith("info-"):
                    # rattler orders paths.json as paths compare: by component ("a/b" before "a-b")
                    paths["paths"] = sorted(entries, key=lambda e: Path(e["_path"]).parts)
                    new_paths = json.dumps(paths, indent=2, ensure_ascii=False).encode()
                    z.writestr(_copy_entry(entry), _info_tar(members, new_paths, options))
                else:
                    z.writestr(_copy_entry(entry), small[entry.filename])
        os.chmod(tmp, 0o644)
        os.replace(tmp, package)
    finally:
        tmp.unlink(missing_ok=True)
    # paths.json's sha256/size came from the bytes as they were packed: verify need not hash them
    # again; the package's own digest (sha256 + md5: repodata's), read once here while the file is
    # still in the page cache, is what the plan's fingerprint, a fix step that only places the
    # package, and publish take; the staged fix's record of what it fixed in this payload goes along
    info = [(m, new_paths if m.name == "info/paths.json" else data) for m, data in members]
    if keep_tree and _info_into(payload, info):
        digest = tree_record.keep(payload, package, md5=True)
    else:
        digest = hash_file(package, md5=True)
    pass_record.write(
        package, PassRecord(digest, payload_hashes_from_pass=True, staged_fix=_fix_record(stage))
    )
    return package


def _info_into(payload: Path, info: list[tuple[tarfile.TarInfo, bytes]]) -> bool:
    """Write the package's info/ files into the packed payload folder, making it the package's
    unpacked tree; False (nothing written) where that cannot be exact: no payload folder, one that
    already holds info/, or an info member other than a plain file or folder."""
    if not payload.is_dir() or os.path.lexists(payload / "info"):
        return False
    for m, _data in info:
        parts = Path(m.name).parts
        if (
            not (m.isfile() or m.isdir())
            or parts[:1] != ("info",)
            or ".." in parts
            or Path(m.name).is_absolute()
        ):
            return False
    for m, data in info:
        dest = payload / m.name
        if m.isdir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        os.chmod(dest, stat.S_IMODE(m.mode) or 0o644)
    return True


def _fix_record(stage: Path) -> dict[str, Any] | None:
    """What the staged fix recorded beside the payload it moved (condapipe.fix.stage_out.record_fix),
    or None (none, or not a JSON object: the fix step then checks every file itself)."""
    path = stage / FIX_RECORD
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes())
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _copy_entry(entry: zipfile.ZipInfo) -> zipfile.ZipInfo:
    out = zipfile.ZipInfo(entry.filename, date_time=entry.date_time)
    out.compress_type = zipfile.ZIP_STORED
    out.external_attr = entry.external_attr
    return out


def _info_tar(members: list[tuple[tarfile.TarInfo, bytes]], paths_json: bytes, options: PackOptions) -> bytes:
    """The engine's info tar with paths.json replaced, compressed at the final level (a few KiB)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m, data in members:
            if m.name == "info/paths.json":
                data = paths_json
            if m.isfile():  # paths.json, and a record that named the work dir, changed size
                m.size = len(data)
            tar.addfile(m, io.BytesIO(data) if m.isfile() else None)
    return zstandard.ZstdCompressor(level=options.zstd_level).compress(buf.getvalue())

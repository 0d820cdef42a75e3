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
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import zstandard

from condapipe.errors import UsageError
from condapipe.hashing import hash_file
from condapipe.package import pass_record, tree_record
from condapipe.package.info_records import rewrite_records
from condapipe.package.io import PackOptions
from condapipe.package.pass_record import PassRecord
from condapipe.package.stage_layout import FIX_RECORD, PAYLOAD, PREFIX_FILE

CHUNK = 1 << 20
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


@dataclass
class _Scan:
    """What one payload file's streaming pass learned: its sha256, size and whether it holds the prefix."""

    sha256: Any
    size: int = 0
    head: bytes = b""
    found: bool = False
    tail: bytes = b""


class _ScanningReader(io.RawIOBase):
    """A reader that hashes, measures and searches for the prefix what the tar reads through it."""

    def __init__(self, raw: IO[bytes], prefix: bytes) -> None:
        self.raw, self.prefix = raw, prefix
        self.scan = _Scan(sha256=hashlib.sha256())

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        scan = self.scan
        scan.sha256.update(data)
        if len(scan.head) < 1024:
            scan.head += data[: 1024 - len(scan.head)]
        if not scan.found:
            window = scan.tail + data
            scan.found = self.prefix in window
            scan.tail = window[-(len(self.prefix) - 1) :] if len(self.prefix) > 1 else b""
        scan.size += len(data)
        buffer[: len(data)] = data
        return len(data)


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
    """The pkg tar, streamed through zstd into `out`; the paths.json entries of its members."""
    entries: list[dict[str, Any]] = []
    compressor = zstandard.ZstdCompressor(compression_params=options.zstd_parameters())
    needle = prefix.encode()
    with (
        compressor.stream_writer(out, closefd=False) as zst,
        tarfile.open(fileobj=zst, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        tar.copybufsize = CHUNK  # type: ignore[attr-defined]  # CPython's; typeshed does not list it
        for rel in members:
            path = payload / rel
            st = path.lstat()
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
            with path.open("rb") as raw:
                reader = _ScanningReader(raw, needle)
                tar.addfile(info, io.BufferedReader(reader, CHUNK))
            scan = reader.scan
            if scan.size != st.st_size:
                raise UsageError(f"{rel}: changed while it was packed")
            entries.append(
                {
                    "_path": rel,
                    "path_type": "hardlink",
                    **_placeholder(
                        rel, scan, prefix, ignore_binary
                    ),  # rattler's field order: before the digest
                    "sha256": scan.sha256.hexdigest(),
                    "size_in_bytes": scan.size,
                }
            )
    return entries


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

"""Real conda packages built member by member with tarfile/zipfile, clean or hostile.

Each hostile kind is what an attacker or a broken upload queue could hand condapipe: members
that escape (absolute, `..`, links out), special files (FIFO, devices), setuid bits, size bombs,
truncated or corrupted streams, and metadata that lies (bad JSON, paths that leave the package).
`escape_dir` is an absolute folder outside the sandbox that escaping members aim at.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

NAME, VERSION, BUILD = "demo", "1.0", "0"
STEM = f"{NAME}-{VERSION}-{BUILD}"


@dataclass
class Member:
    """One tar member: a file (data), a directory, a symlink/hardlink (link), or a raw type."""

    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    link: str = ""
    mode: int = 0o644
    size: int | None = None  # a declared size that differs from the data (size bombs, truncation)


@dataclass
class Spec:
    """What goes into the package: payload members and info members (index/paths computed)."""

    payload: list[Member] = field(default_factory=list)
    index: bytes | None = None  # raw info/index.json (None: a correct one)
    paths: bytes | None = None  # raw info/paths.json (None: a correct one)
    extra_info: list[Member] = field(default_factory=list)


def _clean_payload() -> list[Member]:
    return [
        Member("lib", type=tarfile.DIRTYPE, mode=0o755),
        Member("lib/libdemo.txt", b"demo library\n"),
        Member("lib/libdemo.link", type=tarfile.SYMTYPE, link="libdemo.txt", mode=0o777),
        Member("share/demo/README", b"hello\n"),
        Member("bin/demo", b"#!/bin/sh\necho demo\n", mode=0o755),
    ]


def _index() -> bytes:
    return json.dumps(
        {
            "name": NAME,
            "version": VERSION,
            "build": BUILD,
            "build_number": 0,
            "subdir": "linux-64",
            "depends": [],
        }
    ).encode()


def _paths(payload: list[Member]) -> bytes:
    entries = []
    for m in payload:
        if m.type == tarfile.REGTYPE and m.size is None:
            entries.append(
                {
                    "_path": m.name,
                    "path_type": "hardlink",
                    "sha256": hashlib.sha256(m.data).hexdigest(),
                    "size_in_bytes": len(m.data),
                }
            )
        elif m.type == tarfile.SYMTYPE:
            entries.append({"_path": m.name, "path_type": "softlink"})
    return json.dumps({"paths": entries, "paths_version": 1}).encode()


def _tar(members: list[Member]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = m.type
            info.mode = m.mode
            info.linkname = m.link
            info.mtime = 1_600_000_000
            if m.type in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 1, 3
            if m.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                info.size = len(m.data)
                tar.addfile(info, io.BytesIO(m.data))
                if m.size is not None:  # rewrite the header's declared size after the fact
                    pass
            else:
                tar.addfile(info)
    data = buf.getvalue()
    for m in members:  # declared sizes that lie: patch the ustar size field of that member
        if m.size is not None:
            data = _patch_size(data, m.name, m.size)
    return data


def _patch_size(data: bytes, name: str, size: int) -> bytes:
    raw = bytearray(data)
    pos = 0
    while pos + 512 <= len(raw):
        header = raw[pos : pos + 512]
        if header[:100].rstrip(b"\0").decode(errors="replace") == name:
            raw[pos + 124 : pos + 136] = b"\x80" + b"\0" * 3 + size.to_bytes(8, "big")  # base-256 size
            chk = sum(raw[pos : pos + 148]) + 8 * 32 + sum(raw[pos + 156 : pos + 512])
            raw[pos + 148 : pos + 156] = f"{chk:06o}\0 ".encode()
            return bytes(raw)
        pos += 512
    return bytes(raw)


def _members(spec: Spec) -> tuple[list[Member], list[Member]]:
    info = [
        Member("info/index.json", spec.index if spec.index is not None else _index()),
        Member("info/paths.json", spec.paths if spec.paths is not None else _paths(spec.payload)),
        Member("info/files", "\n".join(m.name for m in spec.payload if m.type == tarfile.REGTYPE).encode()),
        *spec.extra_info,
    ]
    return info, spec.payload


def write_package(spec: Spec, out: Path, *, zstd_checksum: bool = True) -> Path:
    """Write `spec` as a .conda or .tar.bz2 (from `out`'s name)."""
    info, payload = _members(spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.name.endswith(".tar.bz2"):
        out.write_bytes(bz2.compress(_tar(info + payload)))
        return out
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=zstd_checksum, write_content_size=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        zf.writestr(f"pkg-{STEM}.tar.zst", cctx.compress(_tar(payload)))
        zf.writestr(f"info-{STEM}.tar.zst", cctx.compress(_tar(info)))
    return out


# -- the hostile kinds --------------------------------------------------------------------------


def _with(*extra: Member) -> Callable[[Path], Spec]:
    return lambda escape: Spec(payload=[*_clean_payload(), *extra])


def _escape_file(escape: Path) -> str:
    return str(escape / "pwned")


KINDS: dict[str, Callable[[Path], Spec]] = {
    "clean": lambda escape: Spec(payload=_clean_payload()),
    "abs-member": lambda escape: Spec(payload=[*_clean_payload(), Member(_escape_file(escape), b"x")]),
    "dotdot-member": _with(Member("../../../../pwned", b"x")),
    "dotdot-inner": _with(Member("lib/../../pwned", b"x")),
    "abs-symlink": lambda escape: Spec(
        payload=[*_clean_payload(), Member("lib/out", type=tarfile.SYMTYPE, link=str(escape), mode=0o777)]
    ),
    "escaping-symlink": _with(Member("lib/up", type=tarfile.SYMTYPE, link="../../../..", mode=0o777)),
    "write-through-symlink": lambda escape: Spec(
        payload=[
            *_clean_payload(),
            Member("lib/out", type=tarfile.SYMTYPE, link=str(escape), mode=0o777),
            Member("lib/out/pwned", b"x"),
        ]
    ),
    "symlink-chain": _with(
        Member("s", type=tarfile.DIRTYPE, mode=0o755),
        Member("a", type=tarfile.SYMTYPE, link="s/b/..", mode=0o777),
        Member("s/b", type=tarfile.SYMTYPE, link="..", mode=0o777),
    ),
    "hardlink-abs": lambda escape: Spec(
        payload=[*_clean_payload(), Member("lib/passwd", type=tarfile.LNKTYPE, link=str(escape / "secret"))]
    ),
    "hardlink-host": _with(Member("lib/passwd", type=tarfile.LNKTYPE, link="/etc/passwd")),
    "hardlink-dotdot": _with(Member("lib/up", type=tarfile.LNKTYPE, link="../../../secret")),
    "hardlink-forward": _with(
        Member("lib/early", type=tarfile.LNKTYPE, link="lib/later"), Member("lib/later", b"x")
    ),
    "fifo": _with(Member("lib/fifo", type=tarfile.FIFOTYPE)),
    "chardev": _with(Member("lib/null", type=tarfile.CHRTYPE)),
    "blockdev": _with(Member("lib/disk", type=tarfile.BLKTYPE)),
    "setuid": _with(Member("bin/root-shell", b"#!/bin/sh\n", mode=0o4755)),
    "setgid-dir": _with(Member("sgid", type=tarfile.DIRTYPE, mode=0o2755)),
    "huge-declared": _with(Member("lib/huge", b"x" * 1024, size=1 << 40)),
    "big-zeros": _with(Member("lib/zeros", b"\0" * (40 << 20))),
    "many-files": lambda escape: Spec(
        payload=[*_clean_payload(), *(Member(f"many/f{i}", b"") for i in range(3000))]
    ),
    "bad-index-json": lambda escape: Spec(payload=_clean_payload(), index=b"{not json"),
    "index-not-object": lambda escape: Spec(payload=_clean_payload(), index=b"[1, 2]"),
    "index-binary": lambda escape: Spec(payload=_clean_payload(), index=b"\xff\xfe\x00garbage"),
    "index-evil-name": lambda escape: Spec(
        payload=_clean_payload(),
        index=json.dumps({"name": "../../x", "version": "1", "build": "0", "subdir": "linux-64"}).encode(),
    ),
    "index-evil-subdir": lambda escape: Spec(
        payload=_clean_payload(),
        index=json.dumps({"name": "demo", "version": "1.0", "build": "0", "subdir": "../../.."}).encode(),
    ),
    "index-types": lambda escape: Spec(
        payload=_clean_payload(),
        index=json.dumps(
            {"name": 5, "version": [1], "build": None, "build_number": "x", "subdir": 3, "depends": "a"}
        ).encode(),
    ),
    "bad-paths-json": lambda escape: Spec(payload=_clean_payload(), paths=b"{oops"),
    "paths-not-list": lambda escape: Spec(payload=_clean_payload(), paths=b'{"paths": 5}'),
    "paths-escape": lambda escape: Spec(
        payload=_clean_payload(),
        paths=json.dumps(
            {"paths": [{"_path": "../../../secret", "sha256": "0" * 64, "size_in_bytes": 1}]}
        ).encode(),
    ),
    "dir-over-file": _with(Member("lib/libdemo.txt", type=tarfile.DIRTYPE, mode=0o755)),
    "file-over-dir": _with(Member("lib", b"x")),
    "index-fifo": lambda escape: Spec(
        payload=_clean_payload(), extra_info=[Member("info/about.json", type=tarfile.FIFOTYPE)]
    ),
}

# Byte-level damage applied to a clean package after it is written.
DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated-1": lambda b: b[:-1],
    "truncated-half": lambda b: b[: len(b) // 2],
    "truncated-10": lambda b: b[:-10],
    "corrupt-middle": lambda b: b[: len(b) // 2] + bytes([b[len(b) // 2] ^ 0xFF]) + b[len(b) // 2 + 1 :],
    "corrupt-late": lambda b: b[: len(b) - 40] + bytes([b[len(b) - 40] ^ 0x55]) + b[len(b) - 39 :],
    "trailing-garbage": lambda b: b + b"garbage" * 10,
    "empty": lambda b: b"",
    "random": lambda b: bytes((i * 7919 + 13) % 256 for i in range(len(b))),
}


def build_name(kind: str, fmt: str) -> str:
    """The file name the package of `kind` gets."""
    return f"orig{fmt}" if kind == "renamed" else f"{STEM}{fmt}"


def build(kind: str, fmt: str, out_dir: Path, escape: Path) -> Path:
    """A package of `kind` (a KINDS or DAMAGE name, or "renamed"/"wrong-ext") in format `fmt`."""
    name = f"{STEM}{fmt}"
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind in ("no-zstd-checksum", "missing-component") and fmt != ".conda":
        kind = "corrupt-late"  # zstd and zip details exist only in .conda; damage the bzip2 stream instead
    if kind in KINDS:
        return write_package(KINDS[kind](escape), out_dir / name)
    if kind in DAMAGE:
        path = write_package(KINDS["clean"](escape), out_dir / name)
        path.write_bytes(DAMAGE[kind](path.read_bytes()))
        return path
    if kind == "renamed":
        return write_package(KINDS["clean"](escape), out_dir / f"orig{fmt}")
    if kind == "wrong-ext":  # the other format's bytes under this name
        other = ".tar.bz2" if fmt == ".conda" else ".conda"
        src = write_package(KINDS["clean"](escape), out_dir / "tmp" / f"{STEM}{other}")
        path = out_dir / name
        path.write_bytes(src.read_bytes())
        return path
    if kind == "no-zstd-checksum" and fmt == ".conda":
        path = write_package(KINDS["clean"](escape), out_dir / name, zstd_checksum=False)
        return path
    if kind == "missing-component" and fmt == ".conda":
        path = out_dir / name
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("metadata.json", "{}")
        return path
    raise KeyError(kind)


ALL_KINDS: tuple[str, ...] = (
    *KINDS,
    *DAMAGE,
    "renamed",
    "wrong-ext",
    "no-zstd-checksum",
    "missing-component",
)
FORMATS = (".conda", ".tar.bz2")

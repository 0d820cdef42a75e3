"""The streaming pass's tar feeder and its scan threads (issue 35: compress once, on every core).

Why a user cares: the pass packs the payload with one thread that only tars and feeds zstd while
other threads read each file again for paths.json (sha256, size, prefix). What the user installs
must not change by a byte: the compressed payload and its paths.json entries are compared with
the single-threaded way (tarfile's stream writer, every file hashed as the tar reads it) on a
payload holding each kind of member the engine's rules treat differently, with the prefix in
text and binary files, across a read-chunk boundary, in a file larger than a chunk. And
paths.json must describe the bytes packed: a file changed during the pass is refused.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard

from condapipe.errors import UsageError
from condapipe.package import stage_pack
from condapipe.package.io import PackOptions
from condapipe.package.stage_pack import CHUNK, _members, _relative_link, _write_payload, content_kind

PREFIX = "/opt/build/host_env_placehold_placehold_placehold"
MTIME = 1_700_000_000
OPTIONS = PackOptions(zstd_level=3, threads=2, max_memory_mib=0)


def make_payload(root: Path) -> Path:
    p = PREFIX.encode()
    (root / "lib/sub").mkdir(parents=True)
    (root / "share/pkg").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "share/pkg/config.txt").write_bytes(b"prefix=" + p + b"\n")
    (root / "share/pkg/bom.txt").write_bytes(b"\xef\xbb\xbfbom " + p + b"\n")
    (root / "share/pkg/plain.txt").write_bytes(b"no prefix here\n")
    (root / "share/pkg/empty").write_bytes(b"")
    (root / "lib/libdata.so").write_bytes(b"\x7fELF\x00\x01" + os.urandom(5000) + p + b"\x00")
    # larger than a chunk, the prefix split across the first chunk boundary, binary
    big = bytearray(os.urandom(3 * CHUNK + 5))
    big[100] = 0
    cut = CHUNK - len(p) // 2
    big[cut : cut + len(p)] = p
    (root / "lib/libbig.so").write_bytes(bytes(big))
    # larger than a chunk, text, no prefix
    (root / "share/pkg/large.txt").write_bytes(b"line of text\n" * (CHUNK // 6))
    exe = root / "bin/tool"
    exe.write_bytes(b"#!/bin/sh\necho " + p + b"\n")
    exe.chmod(0o755)
    (root / "lib/libdata.so.1").symlink_to(PREFIX + "/lib/libdata.so")  # into the prefix: made relative
    (root / "lib/libdata.so.0").symlink_to("libdata.so")
    (root / "share/pkg/dangling").symlink_to("missing")
    (root / "share/pkg-dir").symlink_to("pkg")
    return root


def reference(payload: Path, ignore_binary: bool) -> tuple[bytes, list[dict[str, Any]]]:
    """The pass as it was: tarfile's stream writer, each file hashed whole as it is packed."""
    out = io.BytesIO()
    entries: list[dict[str, Any]] = []
    compressor = zstandard.ZstdCompressor(compression_params=OPTIONS.zstd_parameters())
    with (
        compressor.stream_writer(out, closefd=False) as zst,
        tarfile.open(fileobj=zst, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        for rel in _members(payload):
            path = payload / rel
            st = path.lstat()
            info = tarfile.TarInfo(rel)
            info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = (
                stat.S_IMODE(st.st_mode), MTIME, 0, 0, "", ""
            )  # fmt: skip
            if path.is_symlink():
                target = _relative_link(path, os.readlink(path), payload, PREFIX)
                if target != os.readlink(path):
                    path.unlink()
                    path.symlink_to(target)
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
                real = path.resolve()
                data = real.read_bytes() if real.is_file() else b""
                entries.append(
                    {
                        "_path": rel,
                        "path_type": "softlink",
                        "sha256": hashlib.sha256(data).hexdigest(),
                        "size_in_bytes": len(os.fsencode(target)),
                    }
                )
                continue
            data = path.read_bytes()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            entry: dict[str, Any] = {"_path": rel, "path_type": "hardlink"}
            if PREFIX.encode() in data:
                mode = "text" if content_kind(data[:1024]) in ("utf-8", "utf-8-bom") else "binary"
                if not (mode == "binary" and ignore_binary):
                    entry |= {"file_mode": mode, "prefix_placeholder": PREFIX}
            entry |= {"sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)}
            entries.append(entry)
    return out.getvalue(), entries


def packed(payload: Path, ignore_binary: bool) -> tuple[bytes, list[dict[str, Any]]]:
    out = io.BytesIO()
    entries = _write_payload(payload, PREFIX, _members(payload), out, OPTIONS, MTIME, ignore_binary)
    return out.getvalue(), entries


@pytest.mark.parametrize("ignore_binary", [False, True], ids=["scan binaries", "no binary scan"])
def test_the_payload_and_paths_json_are_the_bytes_the_single_threaded_pass_wrote(
    tmp_path: Path, ignore_binary: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = make_payload(tmp_path / "payload")
    scanned: list[str] = []
    real_scan = stage_pack._scan_file

    def counted(path: Path, prefix: bytes) -> Any:
        scanned.append(path.relative_to(payload).as_posix())
        return real_scan(path, prefix)

    monkeypatch.setattr(stage_pack, "_scan_file", counted)
    before = shutil.copytree(payload, tmp_path / "before", symlinks=True)
    time.sleep(0.2)  # older than a timestamp tick: the scan threads hash them, not the tar
    want_bytes, want_entries = reference(before, ignore_binary)
    got_bytes, got_entries = packed(payload, ignore_binary)

    assert got_entries == want_entries
    assert got_bytes == want_bytes
    modes = {e["_path"]: e.get("file_mode") for e in got_entries}
    assert modes["share/pkg/config.txt"] == "text" and modes["share/pkg/bom.txt"] == "text"
    assert modes["lib/libbig.so"] == (None if ignore_binary else "binary")  # found across chunks
    assert modes["share/pkg/large.txt"] is None
    assert os.readlink(payload / "lib/libdata.so.1") == "libdata.so"
    files = sorted(e["_path"] for e in got_entries if e["path_type"] == "hardlink")
    assert sorted(scanned) == files  # every file's entry came from the scan threads


def test_a_file_changed_during_the_pass_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process rewrites a file (same size, a later mtime) after the pass listed it, as its
    scan thread is about to read it: whether the tar read it before that write (its bytes then
    differ from the scanned ones) or after (the tar then reads it changed), the pass stops."""
    payload = make_payload(tmp_path / "payload")
    time.sleep(0.2)
    victim = payload / "share/pkg/config.txt"
    real_scan = stage_pack._scan_file

    def rewrite_then_scan(path: Path, prefix: bytes) -> Any:
        if path == victim:
            victim.write_bytes(victim.read_bytes().upper())
            later = victim.stat().st_mtime_ns + 1_000_000_000
            os.utime(victim, ns=(later, later))
        return real_scan(path, prefix)

    monkeypatch.setattr(stage_pack, "_scan_file", rewrite_then_scan)
    with pytest.raises(UsageError, match=r"^share/pkg/config.txt: changed while it was packed$"):
        packed(payload, False)

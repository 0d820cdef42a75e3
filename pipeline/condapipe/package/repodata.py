"""A channel subdir's repodata, written from what indexing needs and nothing more.

A repodata record is the package's `info/index.json` plus its size, sha256 and md5. A `.conda`
keeps index.json in its small inner info-*.tar.zst, so a record costs one read of that member
and one hashing pass over the file, never a decompression of the payload (py-rattler's indexer
held a 2 GB package in memory and took 45 s for it). Records already in repodata.json are kept
while their file has the size they list and is no newer than the repodata; hashes a publisher
has just computed are passed in rather than computed again.

Written per subdir: repodata.json and repodata.json.zst (what conda, mamba and rattler read),
each through a temporary name and a rename; index files of other indexers that would describe
another state of the subdir (sharded repodata, repodata_from_packages.json) are removed, so no
reader ever sees a stale view.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from condapipe.hashing import FileDigest, hash_file
from condapipe.package.io import package_info_from_index, package_suffix, read_index, write_atomic

REPODATA = "repodata.json"
REPODATA_ZST = f"{REPODATA}.zst"
# Written by other indexers (py-rattler, conda-index): they would describe an older state.
FOREIGN_OUTPUTS = ("repodata_from_packages.json", "repodata_shards.msgpack.zst")
_ZST_LEVEL = 16  # a few MB of JSON at most: small, and fast to read


@dataclass(frozen=True)
class Known:
    """What a publisher already knows about a package it just put into the channel, valid while
    the file is the one it placed (same inode, size and mtime)."""

    digest: FileDigest  # with md5
    index: dict[str, Any]  # its info/index.json
    identity: tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns) when placed

    @classmethod
    def placed(cls, path: Path, digest: FileDigest, index: dict[str, Any]) -> Known:
        return cls(digest, index, _identity(path))

    def describes(self, path: Path) -> bool:
        try:
            return bool(self.digest.md5) and _identity(path) == self.identity
        except OSError:
            return False


def _identity(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def record(path: Path, known: Known | None = None) -> dict[str, Any]:
    """The repodata record of one package file (index.json + size, sha256, md5)."""
    if known is not None and known.describes(path):
        index, digest = dict(known.index), known.digest
    else:
        index, digest = read_index(path), hash_file(path, md5=True)
    package_info_from_index(index, path)  # the fields a channel turns into names are sane
    index.update(size=digest.size, sha256=digest.sha256, md5=digest.md5)
    return index


def load_records(subdir_dir: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """(filename -> record) from an existing repodata.json, and its mtime (ns); ({}, 0) if none."""
    path = subdir_dir / REPODATA
    try:
        written = path.stat().st_mtime_ns
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}, 0
    if not isinstance(data, dict):
        return {}, 0
    found: dict[str, dict[str, Any]] = {}
    for key in ("packages", "packages.conda"):
        records = data.get(key)
        if isinstance(records, dict):
            found.update({k: v for k, v in records.items() if isinstance(v, dict)})
    return found, written


def still_valid(path: Path, rec: Mapping[str, Any], written_ns: int) -> bool:
    """A listed record still describes the file: same size, and not written after the repodata."""
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_size == rec.get("size") and info.st_mtime_ns <= written_ns


def package_files(subdir_dir: Path) -> list[Path]:
    """The package files of a subdir (regular files, not hidden: temporaries are hidden)."""
    return sorted(
        p
        for p in subdir_dir.iterdir()
        if package_suffix(p.name) and not p.name.startswith(".") and p.is_file() and not p.is_symlink()
    )


def write_repodata(subdir_dir: Path, subdir: str, records: Mapping[str, dict[str, Any]]) -> None:
    """repodata.json and its .zst for `records` (filename -> record), atomically; stale foreign
    index files removed."""
    data = {
        "info": {"subdir": subdir},
        "packages": {k: records[k] for k in sorted(records) if k.endswith(".tar.bz2")},
        "packages.conda": {k: records[k] for k in sorted(records) if k.endswith(".conda")},
        "removed": [],
        "repodata_version": 1,
    }
    raw = json.dumps(data, indent=2, sort_keys=True).encode() + b"\n"
    for name in FOREIGN_OUTPUTS:
        (subdir_dir / name).unlink(missing_ok=True)
    # .zst first: a reader that prefers it never pairs a new .json with an old .zst for long.
    write_atomic(subdir_dir / REPODATA_ZST, zstandard.ZstdCompressor(level=_ZST_LEVEL).compress(raw))
    write_atomic(subdir_dir / REPODATA, raw)
    os.chmod(subdir_dir / REPODATA, 0o644)
    os.chmod(subdir_dir / REPODATA_ZST, 0o644)

"""File hashing for every stage: package digests, paths.json entries, state fingerprints, uploads.

One reader so that every stage hashes the same way: in 1 MiB chunks (packages can be gigabytes,
memory stays flat), and only once per file even when a caller needs both sha256 and md5.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20


@dataclass(frozen=True)
class FileDigest:
    """sha256 (hex), size in bytes and, when asked for, md5 (hex) of one file."""

    sha256: str
    size: int
    md5: str | None = None


def hash_file(path: Path | str, *, md5: bool = False) -> FileDigest:
    """Hash a file in one pass; md5 only when asked (anaconda.org's storage checks it)."""
    sha = hashlib.sha256()
    extra = hashlib.md5() if md5 else None
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            sha.update(chunk)
            if extra is not None:
                extra.update(chunk)
            size += len(chunk)
    return FileDigest(sha.hexdigest(), size, extra.hexdigest() if extra is not None else None)

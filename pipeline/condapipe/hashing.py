"""File hashing for every stage: package digests, paths.json entries, state fingerprints, uploads.

One reader so that every stage hashes the same way: in 1 MiB chunks (packages can be gigabytes,
memory stays flat), and only once per file even when a caller needs both sha256 and md5. With
both, the two digests run at once (hashlib releases the GIL for large updates): md5 on a second
thread a few chunks behind the reading one, so a package's hash takes about as long as its slower
digest, not the sum of the two (issue 35: 1.9 GB hashed after the packing pass on every build).
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20
# chunks the md5 thread may lag behind the reader (bounded memory: 8 MiB at most)
_LAG_CHUNKS = 8
# below this size a second thread costs more than it saves
_THREAD_MIN_BYTES = 4 * CHUNK


@dataclass(frozen=True)
class FileDigest:
    """sha256 (hex), size in bytes and, when asked for, md5 (hex) of one file."""

    sha256: str
    size: int
    md5: str | None = None


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def hash_file(path: Path | str, *, md5: bool = False) -> FileDigest:
    """Hash a file in one read; md5 only when asked (anaconda.org's storage checks it), then on a
    second thread beside sha256 when the file is large and the process has a second core."""
    with open(path, "rb") as fh:
        if md5 and os.fstat(fh.fileno()).st_size >= _THREAD_MIN_BYTES and _cores() > 1:
            return _sha256_md5_concurrently(fh)
        sha = hashlib.sha256()
        extra = hashlib.md5() if md5 else None
        size = 0
        while chunk := fh.read(CHUNK):
            sha.update(chunk)
            if extra is not None:
                extra.update(chunk)
            size += len(chunk)
    return FileDigest(sha.hexdigest(), size, extra.hexdigest() if extra is not None else None)


def _sha256_md5_concurrently(reader: BinaryIO) -> FileDigest:
    """sha256 on this thread as it reads, md5 on another fed the same chunks (no second read)."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=_LAG_CHUNKS)

    def digest_md5() -> None:
        while (chunk := chunks.get()) is not None:
            md5.update(chunk)

    worker = threading.Thread(target=digest_md5, name="md5", daemon=True)
    worker.start()
    size = 0
    try:
        while chunk := reader.read(CHUNK):
            chunks.put(chunk)
            sha.update(chunk)
            size += len(chunk)
    finally:
        chunks.put(None)  # also on a read error: the md5 thread ends, nothing is left running
        worker.join()
    return FileDigest(sha.hexdigest(), size, md5.hexdigest())

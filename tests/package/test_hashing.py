"""hash_file: one read of a file, sha256 and (when asked) md5 at once on two threads.

Why a user cares: repodata's sha256 and md5 of a multi-GB package must be exactly hashlib's, however
the work is split; a small file takes the plain one-thread path and must agree as well.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from condapipe.hashing import CHUNK, hash_file


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, 4 * CHUNK, 9 * CHUNK + 7], ids=str)
def test_both_digests_are_hashlibs_at_every_size(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "pkg.conda"
    path.write_bytes(data)

    digest = hash_file(path, md5=True)

    assert digest.sha256 == hashlib.sha256(data).hexdigest()
    assert digest.md5 == hashlib.md5(data).hexdigest()
    assert digest.size == size
    assert hash_file(path) == type(digest)(digest.sha256, size, None)

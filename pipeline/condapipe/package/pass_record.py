"""What the pass that wrote a package file already knows about it, for the steps after it.

Why (issue 35, `--pack-from-stage`): condapipe's streaming pass (condapipe.package.stage_pack)
computes every payload file's sha256 and size from the bytes it packs: scan threads read each file
beside the tar, and a file whose size, mtime, ctime or inode differs between the pass's listing,
its scan and the tar's read stops the pass (one modified within a timestamp tick of the pass's
start is hashed by the tar itself, through the bytes it packs), and the fix step's
write hashes the file it wrote once (sha256 + md5 + size). Without a record, verify hashes every
payload file again and publish reads the whole package again for repodata's digests. With one,
they take what was computed, but only while the file is the one the pass wrote.

"The one the pass wrote" is the file's identity: device, inode, size and mtime (ns). Any write to
it changes its mtime; a rename or a hard link (the test step's sibling channel, publish) keeps
them. A write in the same clock tick as the pass's last one would keep the mtime too, so the
record is taken only once the clock has passed that tick (as git's racy-index rule); a file that
differs in any of them is read again. Beside `<dir>/<package>`: `<dir>/.<package>.pass.json`
(hidden: never taken for a package or published). Written only with --pack-from-stage: without
it no record exists and every step reads the package as before.

The packing pass also carries what the staged fix recorded about the payload it packed (the files
it fixed, with the fingerprint of its rules and code): with that, the fix step places the package
without unpacking it (condapipe.fix.fixer.fix_package).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condapipe.hashing import FileDigest
from condapipe.package.io import write_atomic

_VERSION = 1
# Longer than any file system's timestamp tick (ext4/xfs follow the kernel's coarse clock, a few
# ms; FAT's 2 s is not a file system a build runs on): a later write gets a later mtime.
TICK_NS = 50_000_000


@dataclass(frozen=True)
class PassRecord:
    """What the writer knew: the package's digests (None when the pass did not hash the whole file)
    and whether paths.json's sha256/size were computed from the payload as it was packed (read
    beside the tar from files unchanged through the pass, or through the tar itself)."""

    digest: FileDigest | None
    payload_hashes_from_pass: bool
    # what the staged fix did to the payload this pass packed, as it recorded it (its files, warnings
    # and the fingerprint of the fix it ran; condapipe.fix.stage_out.record_fix): None, no staged fix
    staged_fix: dict[str, Any] | None = None


def record_path(package: Path) -> Path:
    return package.with_name(f".{package.name}.pass.json")


def _identity(package: Path) -> list[int]:
    st = os.stat(package)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def write(package: Path, record: PassRecord) -> None:
    """Record what the pass that just wrote `package` knows (after the clock has left its tick)."""
    wait_ns = os.stat(package).st_mtime_ns + TICK_NS - time.time_ns()
    if wait_ns > 0:  # at most 50 ms, once per package
        time.sleep(wait_ns / 1e9)
    digest = record.digest
    data = {
        "version": _VERSION,
        "identity": _identity(package),
        "payload_hashes_from_pass": record.payload_hashes_from_pass,
        "digest": None
        if digest is None
        else {"sha256": digest.sha256, "size": digest.size, "md5": digest.md5},
        "staged_fix": record.staged_fix,
    }
    write_atomic(record_path(package), json.dumps(data).encode())


def trusted(package: Path) -> PassRecord | None:
    """The record of `package` when it is still the file the pass wrote, else None (read it again)."""
    rec = record_path(package)
    try:
        if rec.is_symlink() or not rec.is_file():
            return None
        data = json.loads(rec.read_bytes())
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return None
        if data.get("identity") != _identity(package):
            return None
        raw = data.get("digest")
        digest = None
        if isinstance(raw, dict):
            digest = FileDigest(str(raw["sha256"]), int(raw["size"]), raw.get("md5"))
            if digest.size != package.stat().st_size:
                return None
        staged = data.get("staged_fix")
        return PassRecord(
            digest,
            data.get("payload_hashes_from_pass") is True,
            staged if isinstance(staged, dict) else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def move_with(package: Path, dest: Path) -> None:
    """Move `package`'s record beside `dest` (where the package was just moved); none: nothing."""
    rec = record_path(package)
    if rec.is_file() and not rec.is_symlink():
        shutil.move(rec, record_path(dest))


def discard(package: Path) -> None:
    record_path(package).unlink(missing_ok=True)

"""Files written whole or not at all (temporary sibling, fsync, rename, fsync of the folder): the
plan's state, its report and the work dir's holder record. Its own module so that lock_holder and
state both use it without importing each other."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so readers see the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # said about the file the user named, not our temporary name
        _remove_quietly(tmp)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    except BaseException:  # Ctrl-C mid-write: no temporary file stays behind
        _remove_quietly(tmp)
        raise
    _fsync_dir(path.parent)


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    """Text version of atomic_write_bytes (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable: without this a crash can forget it even though the data was synced."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

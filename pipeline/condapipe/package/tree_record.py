"""The unpacked tree a package was written from, kept for the next reader of the same bytes.

The fix step unpacks every package and writes its output from that tree (repacked, or the same
tar streams recompressed, or copied); verify would unpack the same bytes again (at 3.4 GB the
largest part of its time). So fix may keep the tree beside its output with a record: the
package's sha256 and size, and each file of the tree with its size and mtime. A reader trusts
the tree only when the package still hashes to the recorded sha256 and the tree is exactly as
recorded (no file added, removed, resized or touched); anything else and it unpacks as before.

With --pack-from-stage the packing pass keeps such a tree too: the payload folder it packed, with
the info files written beside it (condapipe.package.stage_pack); the plan's fix step, when it only
places that package into its output, moves the tree along (move_with).

Beside `<dir>/<package>`: `<dir>/.<package>.tree/` and `<dir>/.<package>.tree.json` (hidden:
never taken for a package or published). A tree read for the last time is renamed out of the way
at once and removed beside the steps that follow (`discard_soon`; removing 3.4 GB of files is
cleanup, not verification); the plan runner waits for those removals before it returns.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
from pathlib import Path

from condapipe.hashing import FileDigest, hash_file
from condapipe.package import pass_record
from condapipe.package.io import write_atomic

_VERSION = 1
_REMOVING = ".removing-"  # `.<package>.tree.removing-<pid>-<n>`: a tree on its way out
_removals: list[threading.Thread] = []
_removals_lock = threading.Lock()
_numbers = itertools.count()


def tree_path(package: Path) -> Path:
    return package.with_name(f".{package.name}.tree")


def record_path(package: Path) -> Path:
    return package.with_name(f".{package.name}.tree.json")


def _listing(root: Path) -> dict[str, list[int]]:
    """Every entry under root (files, links, folders) with its size and mtime, without following links."""
    found: dict[str, list[int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            found[os.path.relpath(full, root)] = [st.st_mode, st.st_size, st.st_mtime_ns]
    return found


def keep(root: Path, package: Path, *, md5: bool = False) -> FileDigest:
    """Move the tree `package` was just written from beside it, with its record; the package's
    digest (with md5 when asked: publish's repodata needs it)."""
    discard(package)
    dest = tree_path(package)
    os.replace(root, dest)
    digest = hash_file(package, md5=md5)
    record = {
        "version": _VERSION,
        "package_sha256": digest.sha256,
        "package_size": digest.size,
        "entries": _listing(dest),
    }
    write_atomic(record_path(package), json.dumps(record).encode())
    return digest


def trusted_tree(package: Path) -> Path | None:
    """The kept tree of `package` when the record says it holds exactly these bytes, else None."""
    rec_file, tree = record_path(package), tree_path(package)
    if not rec_file.is_file() or rec_file.is_symlink() or not tree.is_dir() or tree.is_symlink():
        return None
    try:
        record = json.loads(rec_file.read_bytes())
        if not isinstance(record, dict) or record.get("version") != _VERSION:
            return None
        if package.stat().st_size != record.get("package_size"):
            return None
        if _listing(tree) != record.get("entries"):
            return None
        known = pass_record.trusted(package)  # --pack-from-stage: the fix step's hash of this very file
        sha256 = known.digest.sha256 if known and known.digest else hash_file(package).sha256
        if sha256 != record.get("package_sha256"):
            return None
    except (OSError, ValueError):
        return None
    return tree


def move_with(package: Path, dest: Path) -> None:
    """Move `package`'s kept tree and its record beside `dest`, where the same bytes now are (a
    rename or a hard link of the package); none: nothing. The record's digest and listing hold
    there unchanged (a rename keeps every entry's mode, size and mtime)."""
    tree, record = tree_path(package), record_path(package)
    if not tree.is_dir() or tree.is_symlink() or not record.is_file() or record.is_symlink():
        return
    discard(dest)
    shutil.move(tree, tree_path(dest))
    shutil.move(record, record_path(dest))


def discard(package: Path) -> None:
    """Remove a kept tree and its record (after use, or before a new one is kept)."""
    record_path(package).unlink(missing_ok=True)
    shutil.rmtree(tree_path(package), ignore_errors=True)


def discard_soon(package: Path) -> None:
    """Discard the kept tree without waiting for its files to go: its record goes and the tree is
    renamed away at once (nothing can read or trust it after this returns); a thread removes it,
    with any tree of the same package an interrupted run left on its way out. Whoever calls this
    calls wait_for_removals() before the work is done (the plan runner does)."""
    record_path(package).unlink(missing_ok=True)
    tree = tree_path(package)
    target = tree.with_name(f"{tree.name}{_REMOVING}{os.getpid()}-{next(_numbers)}")
    doomed: list[Path] = []
    try:
        os.rename(tree, target)
        doomed.append(target)
    except FileNotFoundError:
        pass
    except OSError:  # not renamable (a mount point, no permission): removed here and now
        shutil.rmtree(tree, ignore_errors=True)
    stale = [p for p in package.parent.glob(f"{glob_escape(tree.name)}{_REMOVING}*") if p not in doomed]
    targets = doomed + stale
    if not targets:
        return
    worker = threading.Thread(target=_remove_all, args=(targets,), name="kept-tree-removal", daemon=True)
    with _removals_lock:
        _removals.append(worker)
    worker.start()


def wait_for_removals() -> None:
    """Return once every tree discard_soon handed over is gone."""
    with _removals_lock:
        pending, _removals[:] = list(_removals), []
    for worker in pending:
        worker.join()


def _remove_all(paths: list[Path]) -> None:
    for path in paths:
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path, ignore_errors=True)


def glob_escape(name: str) -> str:
    """`name` matched literally by Path.glob (package names may hold `[`)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)

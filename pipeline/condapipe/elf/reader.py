"""Minimal ELF reader over mmap: headers, sections, the dynamic table and its strings.

lief and patchelf load a whole file into memory; for multi-GB PyTorch libraries we only
need a few kilobytes (headers, `.dynamic`, `.dynstr`, a section's location), so this reads
them through mmap and never touches the rest of the file.
"""

from __future__ import annotations

import array
import functools
import mmap
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

ELF_MAGIC = b"\x7fELF"

# Dynamic tags used here (see elf.h).
DT_NULL = 0
DT_NEEDED = 1
DT_STRSZ = 10
DT_STRTAB = 5
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
DT_VERDEF = 0x6FFFFFFC
DT_VERDEFNUM = 0x6FFFFFFD
DT_VERNEED = 0x6FFFFFFE
DT_VERNEEDNUM = 0x6FFFFFFF
# Tags whose value is an offset into the dynamic string table.
STRING_TAGS = frozenset({DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, 0x7FFFFFFD, 0x7FFFFFFF, 0x6FFFFEFA})
PT_LOAD = 1
PT_DYNAMIC = 2
SHT_DYNSYM = 11


class NotElf(ValueError):
    """The file is not an ELF file this reader understands."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    addr: int
    link: int


@dataclass(frozen=True)
class DynEntry:
    tag: int
    value: int
    file_offset: int  # where the entry itself lives, for in-place edits


@dataclass(frozen=True)
class DynamicInfo:
    """What the dynamic loader reads: needed libraries, soname, search paths."""

    needed: tuple[str, ...]
    soname: str | None
    rpath: str | None
    runpath: str | None


F = TypeVar("F", bound=Callable[..., Any])


def _guarded(method: F) -> F:
    """Damaged files surface as NotElf, not as struct/index errors from deep inside."""

    @functools.wraps(method)
    def wrapper(self: ElfFile, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (struct.error, IndexError, OverflowError) as exc:
            raise NotElf(f"{self.path}: damaged ELF ({exc})") from exc

    return wrapper  # type: ignore[return-value]


def is_elf(path: Path | str) -> bool:
    """True when the file starts with the ELF magic (cheap: reads 4 bytes)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == ELF_MAGIC
    except OSError:
        return False


class ElfFile:
    """An ELF file mapped into memory; use as a context manager.

    `writable=True` maps it shared read-write so that patchers can edit bytes in place;
    only the pages touched are written back.
    """

    def __init__(self, path: Path | str, *, writable: bool = False) -> None:
        self.path = Path(path)
        self._fh: BinaryIO = open(self.path, "r+b" if writable else "rb")  # noqa: SIM115
        try:
            size = self._fh.seek(0, 2)
            if size < 52:
                raise NotElf(f"{self.path}: too small to be ELF")
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            self.mm = mmap.mmap(self._fh.fileno(), 0, access=access)
            self._parse_header()
        except BaseException:  # close on any way out (NotElf, OSError, an interrupt), then re-raise
            self.close()
            raise
        self._sections: list[Section] | None = None
        self._dyn: list[DynEntry] | None = None

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        mm = getattr(self, "mm", None)
        if mm is not None and not mm.closed:
            mm.close()
        self._fh.close()

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- header ----------------------------------------------------------------------
    @_guarded
    def _parse_header(self) -> None:
        ident = self.mm[:16]
        if ident[:4] != ELF_MAGIC:
            raise NotElf(f"{self.path}: not an ELF file")
        if ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise NotElf(f"{self.path}: unknown ELF class or byte order")
        self.is64 = ident[4] == 2
        self.endian = "<" if ident[5] == 1 else ">"
        e = self.endian
        if self.is64:
            fields = struct.unpack_from(e + "HHIQQQIHHHHHH", self.mm, 16)
        else:
            fields = struct.unpack_from(e + "HHIIIIIHHHHHH", self.mm, 16)
        (self.e_type, self.e_machine, _, _, self.phoff, self.shoff, _, _, self.phentsize, self.phnum,
         self.shentsize, self.shnum, self.shstrndx) = fields  # fmt: skip
        self._phdr_fmt = e + ("IIQQQQQQ" if self.is64 else "IIIIIIII")
        self._shdr_fmt = e + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII")
        self._dyn_fmt = e + ("qQ" if self.is64 else "iI")
        self.dyn_entsize = struct.calcsize(self._dyn_fmt)

    @_guarded
    def program_headers(self) -> list[tuple[int, int, int, int]]:
        """(type, offset, vaddr, filesz) of each program header."""
        out = []
        for i in range(self.phnum):
            raw = struct.unpack_from(self._phdr_fmt, self.mm, self.phoff + i * self.phentsize)
            if self.is64:
                p_type, _flags, off, vaddr, _paddr, filesz, _memsz, _align = raw
            else:
                p_type, off, vaddr, _paddr, filesz, _memsz, _flags, _align = raw
            out.append((p_type, off, vaddr, filesz))
        return out

    @_guarded
    def sections(self) -> list[Section]:
        """Section headers with names (empty for files stripped of section headers)."""
        if self._sections is not None:
            return self._sections
        if self.shoff == 0 or self.shoff >= len(self.mm):
            self._sections = []
            return self._sections
        raw = [
            struct.unpack_from(self._shdr_fmt, self.mm, self.shoff + i * self.shentsize)
            for i in range(self._section_count())
        ]
        strndx = self.shstrndx if self.shstrndx != 0xFFFF else raw[0][6]
        names_off = raw[strndx][4] if strndx < len(raw) else 0
        out = []
        for name, typ, _flags, addr, off, size, link, _info, _align, _ent in raw:
            out.append(
                Section(self.cstring(names_off + name) if names_off else "", typ, off, size, addr, link)
            )
        self._sections = out
        return out

    def _section_count(self) -> int:
        if self.shnum:
            return self.shnum
        return struct.unpack_from(self._shdr_fmt, self.mm, self.shoff)[5]

    def section(self, name: str) -> Section | None:
        for sec in self.sections():
            if sec.name == name:
                return sec
        return None

    # -- strings and addresses ---------------------------------------------------------
    @_guarded
    def cstring(self, offset: int) -> str:
        end = self.mm.find(b"\0", offset)
        if end < 0:
            raise NotElf(f"{self.path}: unterminated string at {offset:#x}")
        return self.mm[offset:end].decode("utf-8", "surrogateescape")

    @_guarded
    def vaddr_to_offset(self, vaddr: int) -> int:
        for p_type, off, start, filesz in self.program_headers():
            if p_type == PT_LOAD and start <= vaddr < start + filesz:
                return off + (vaddr - start)
        for sec in self.sections():
            if sec.addr and sec.addr <= vaddr < sec.addr + sec.size:
                return sec.offset + (vaddr - sec.addr)
        raise NotElf(f"{self.path}: address {vaddr:#x} is not in the file")

    # -- dynamic table ------------------------------------------------------------------
    @_guarded
    def dynamic_entries(self) -> list[DynEntry]:
        """Entries of the dynamic table up to DT_NULL (empty for static files)."""
        if self._dyn is not None:
            return self._dyn
        start = size = None
        for p_type, off, _vaddr, filesz in self.program_headers():
            if p_type == PT_DYNAMIC:
                start, size = off, filesz
        if start is None or size is None:  # both come from the same header
            sec = self.section(".dynamic")
            if sec is None:
                self._dyn = []
                return self._dyn
            start, size = sec.offset, sec.size
        out = []
        for pos in range(start, start + size - self.dyn_entsize + 1, self.dyn_entsize):
            tag, val = struct.unpack_from(self._dyn_fmt, self.mm, pos)
            if tag == DT_NULL:
                break
            out.append(DynEntry(tag, val, pos))
        self._dyn = out
        return out

    @_guarded
    def dynstr_offset(self) -> int | None:
        """File offset of the dynamic string table."""
        for entry in self.dynamic_entries():
            if entry.tag == DT_STRTAB:
                return self.vaddr_to_offset(entry.value)
        return None

    @_guarded
    def dyn_string(self, entry: DynEntry) -> str:
        base = self.dynstr_offset()
        if base is None:
            raise NotElf(f"{self.path}: dynamic table without DT_STRTAB")
        return self.cstring(base + entry.value)

    @_guarded
    def dynamic_info(self) -> DynamicInfo:
        needed: list[str] = []
        soname = rpath = runpath = None
        for entry in self.dynamic_entries():
            if entry.tag == DT_NEEDED:
                needed.append(self.dyn_string(entry))
            elif entry.tag == DT_SONAME:
                soname = self.dyn_string(entry)
            elif entry.tag == DT_RPATH:
                rpath = self.dyn_string(entry)
            elif entry.tag == DT_RUNPATH:
                runpath = self.dyn_string(entry)
        return DynamicInfo(tuple(needed), soname, rpath, runpath)

    @_guarded
    def dynstr_references(self) -> list[int]:
        """Every dynstr offset something in the file refers to (tags, symbols, versions).

        Linkers merge string tails, so one string can be the suffix of another; an
        in-place edit must know all referrers to avoid corrupting a shared tail.
        """
        refs = [e.value for e in self.dynamic_entries() if e.tag in STRING_TAGS]
        for sec in self.sections():
            if sec.type == SHT_DYNSYM:
                entsize = 24 if self.is64 else 16
                words = array.array("I")
                words.frombytes(self.mm[sec.offset : sec.offset + (sec.size // entsize) * entsize])
                if (self.endian == "<") != (sys.byteorder == "little"):
                    words.byteswap()
                refs.extend(words[0 :: entsize // 4])  # st_name is the first word
        tags = {e.tag: e.value for e in self.dynamic_entries()}
        e = self.endian
        if DT_VERNEED in tags:
            pos = self.vaddr_to_offset(tags[DT_VERNEED])
            for _ in range(tags.get(DT_VERNEEDNUM, 0)):
                _ver, cnt, file_, aux, nxt = struct.unpack_from(e + "HHIII", self.mm, pos)
                refs.append(file_)
                apos = pos + aux
                for _ in range(cnt):
                    _h, _f, _o, name, anext = struct.unpack_from(e + "IHHII", self.mm, apos)
                    refs.append(name)
                    apos += anext
                if not nxt:
                    break
                pos += nxt
        if DT_VERDEF in tags:
            pos = self.vaddr_to_offset(tags[DT_VERDEF])
            for _ in range(tags.get(DT_VERDEFNUM, 0)):
                _v, _fl, _ndx, cnt, _hash, aux, nxt = struct.unpack_from(e + "HHHHIII", self.mm, pos)
                apos = pos + aux
                for _ in range(cnt):
                    name, anext = struct.unpack_from(e + "II", self.mm, apos)
                    refs.append(name)
                    apos += anext
                if not nxt:
                    break
                pos += nxt
        return refs


def read_dynamic(path: Path | str) -> DynamicInfo:
    """Needed libraries, soname and search paths of an ELF file."""
    with ElfFile(path) as elf:
        return elf.dynamic_info()

"""CUDA archs inside a static library: the `.nv_fatbin` of every object in an `ar` archive.

magma ships as libmagma.a, which pytorch links into libtorch_cuda.so: a libmagma.a built for the
wrong GPUs only shows up as "no kernel image is available" on users' machines. So verify reads
each member object's fatbin sections with the same parser it uses for shared libraries.

Format (GNU/System V `ar`, as GNU ar and llvm-ar write it): the magic `!<arch>\\n`, then per
member a 60-byte text header (name 16, mtime 12, uid 6, gid 6, mode 8, size 10, "`\\n") and the
data, padded to an even offset. Special members: `/` and `/SYM64/` (symbol tables), `//` (long
names, referenced as `/123`); BSD archives name long members `#1/N` with the name leading the
data. Thin archives (`!<thin>\\n`) hold only paths to files elsewhere and are refused.
Archives come from packages, i.e. from users: every size and offset is checked against the
file, the member count is bounded, and the parser always moves forward, so junk ends in an
ArchiveError, never in a hang or a huge allocation.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from condapipe.elf.fatbin import FATBIN_SECTIONS, FatbinEntry, FatbinError, FatbinReport, parse_fatbin

AR_MAGIC = b"!<arch>\n"
THIN_MAGIC = b"!<thin>\n"
_HEADER = 60
MAX_MEMBERS = 1_000_000  # libtorch_cuda-sized archives have tens of thousands
_SHT_NOBITS = 8


class ArchiveError(ValueError):
    """The archive (or an ELF object inside it) is malformed."""


@dataclass(frozen=True)
class Member:
    name: str
    offset: int  # file offset of the member's data
    size: int


@dataclass(frozen=True)
class ArchiveReport:
    """The fatbins of a static library: one FatbinReport per member object with device code."""

    members: int  # object members (symbol and name tables not counted)
    device: tuple[tuple[str, FatbinReport], ...]  # (member name, its fatbin), in archive order

    @property
    def sass(self) -> frozenset[str]:
        return frozenset().union(*(fat.sass for _, fat in self.device)) if self.device else frozenset()

    @property
    def ptx(self) -> frozenset[str]:
        return frozenset().union(*(fat.ptx for _, fat in self.device)) if self.device else frozenset()

    @property
    def entries(self) -> tuple[FatbinEntry, ...]:
        return tuple(e for _, fat in self.device for e in fat.entries)

    def to_dict(self) -> dict[str, object]:
        return {
            "sass": sorted(self.sass),
            "ptx": sorted(self.ptx),
            "entries": len(self.entries),
            "compressed_entries": sum(fat.compressed for _, fat in self.device),
            "objects": self.members,
            "objects_with_device_code": len(self.device),
        }


def is_archive(path: Path | str) -> bool:
    """True when the file starts with the ar magic (regular archives; thin ones too)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(8) in (AR_MAGIC, THIN_MAGIC)
    except OSError:
        return False


def _decimal(field: bytes, what: str, at: int) -> int:
    text = field.decode("ascii", "replace").strip()
    if not text.isdigit():
        raise ArchiveError(f"member header at {at:#x}: {what} {text!r} is not a number")
    return int(text)


def iter_members(data: bytes | memoryview | mmap.mmap) -> Iterator[Member]:
    """The object members of an archive held in `data` (symbol and long-name tables skipped)."""
    head = bytes(data[:8])
    if head == THIN_MAGIC:
        raise ArchiveError("thin archive: its members are files elsewhere, not inside the package")
    if head != AR_MAGIC:
        raise ArchiveError("not an ar archive")
    end = len(data)
    pos = 8
    long_names = b""
    count = 0
    while pos < end:
        if pos + _HEADER > end:
            if not any(bytes(data[pos:end]).strip(b"\n")):
                return  # trailing newline padding
            raise ArchiveError(f"truncated member header at {pos:#x}")
        header = bytes(data[pos : pos + _HEADER])
        if header[58:60] != b"`\n":
            raise ArchiveError(f"member header at {pos:#x} lacks the ar terminator")
        size = _decimal(header[48:58], "size", pos)
        start = pos + _HEADER
        if start + size > end:
            raise ArchiveError(f"member at {pos:#x} ({size} bytes) runs past the end of the archive")
        raw_name = header[:16].rstrip(b" ")
        offset, length = start, size
        if raw_name in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            name = None
        elif raw_name == b"//":
            long_names, name = bytes(data[start : start + size]), None
        elif raw_name.startswith(b"/") and raw_name[1:].isdigit():
            at = int(raw_name[1:])
            stop = long_names.find(b"/\n", at)
            if at >= len(long_names) or stop < 0:
                raise ArchiveError(
                    f"member header at {pos:#x}: long name offset {at} is outside the name table"
                )
            name = long_names[at:stop].decode("utf-8", "replace")
        elif raw_name.startswith(b"#1/"):
            name_len = _decimal(raw_name[3:], "BSD name length", pos)
            if name_len > size:
                raise ArchiveError(f"member header at {pos:#x}: BSD name longer than the member")
            name = bytes(data[start : start + name_len]).rstrip(b"\0").decode("utf-8", "replace")
            offset, length = start + name_len, size - name_len
        else:
            name = raw_name.rstrip(b"/").decode("utf-8", "replace")
        if name is not None:
            count += 1
            if count > MAX_MEMBERS:
                raise ArchiveError(f"more than {MAX_MEMBERS} members")
            yield Member(name, offset, length)
        pos = start + size + (size & 1)


def _fatbin_sections(data: bytes | memoryview | mmap.mmap, base: int, size: int) -> Iterator[tuple[int, int]]:
    """(offset, size) relative to `base` of the fatbin sections of the ELF object data[base:base+size]."""
    if size < 64 or bytes(data[base : base + 4]) != b"\x7fELF":
        return
    elf_class, order = data[base + 4], data[base + 5]
    if order != 1 or elf_class not in (1, 2):
        raise ArchiveError("object is not a little-endian ELF file")
    if elf_class == 2:
        shoff = struct.unpack_from("<Q", data, base + 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, base + 0x3A)
        sh = struct.Struct("<IIQQQQIIQQ")
    else:
        shoff = struct.unpack_from("<I", data, base + 0x20)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, base + 0x2E)
        sh = struct.Struct("<IIIIIIIIII")
    if shoff == 0:
        return
    if shentsize < sh.size:
        raise ArchiveError(f"section header size {shentsize} is too small")
    if shnum == 0:  # extended numbering: the count is in section 0's size field
        if shoff + sh.size > size:
            raise ArchiveError("section headers run past the end of the object")
        shnum = sh.unpack_from(data, base + shoff)[5]
    if shoff + shentsize * shnum > size:
        raise ArchiveError("section headers run past the end of the object")
    headers = [sh.unpack_from(data, base + shoff + i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        raise ArchiveError("section name table index out of range")
    str_off, str_size = headers[shstrndx][4], headers[shstrndx][5]
    if str_off + str_size > size:
        raise ArchiveError("section name table runs past the end of the object")
    names = bytes(data[base + str_off : base + str_off + str_size])
    for name_off, sec_type, _flags, _addr, off, sec_size, *_rest in headers:
        if sec_type == _SHT_NOBITS or name_off >= len(names):
            continue
        name = names[name_off : names.find(b"\0", name_off) if b"\0" in names[name_off:] else None]
        if name.decode("ascii", "replace") not in FATBIN_SECTIONS:
            continue
        if off + sec_size > size:
            raise ArchiveError(f"section {name.decode(errors='replace')} runs past the end of the object")
        yield off, sec_size


def read_archive_fatbins(path: Path | str) -> ArchiveReport:
    """The CUDA code objects of every member of a static library (ArchiveError when malformed)."""
    path = Path(path)
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        if size < 8:
            raise ArchiveError(f"{path}: not an ar archive")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            members = 0
            device: list[tuple[str, FatbinReport]] = []
            view = memoryview(mm)
            try:
                for member in iter_members(mm):
                    members += 1
                    entries: list[FatbinEntry] = []
                    try:
                        for off, sec_size in _fatbin_sections(mm, member.offset, member.size):
                            start = member.offset + off
                            part = view[start : start + sec_size]
                            try:
                                entries.extend(parse_fatbin(part, start))
                            finally:
                                part.release()
                    except (struct.error, FatbinError, ArchiveError) as exc:
                        raise ArchiveError(f"{path}({member.name}): {exc}") from None
                    if entries:
                        device.append((member.name, FatbinReport(tuple(entries))))
            except ArchiveError as exc:
                raise ArchiveError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None
            finally:
                view.release()
    return ArchiveReport(members, tuple(device))

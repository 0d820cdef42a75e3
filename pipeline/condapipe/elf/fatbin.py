"""Parse the `.nv_fatbin` section of an ELF: which SASS and PTX archs it really contains.

A package that promises `8.0;9.0+PTX` but lacks sm_90 code fails only on users' GPUs
("no kernel image is available"), so verify reads the fatbins instead of trusting flags.

Layout (little endian): the section holds one or more containers, each a 16-byte header
(magic 0xBA55ED50, version u16, header size u16, payload size u64) followed by entries.
Each entry header starts with kind u16 (1 PTX, 2 ELF/SASS), version u16, header size u32,
payload size u64, compressed size u32, u32, minor u16, major u16, arch u32, name offset
u32, name length u32, flags u64, u64, uncompressed size u64; newer toolkits append
fields (the header size says how many). Flag bits: 0x2000 payload compressed with LZ4
(block format; `-compress-mode=speed` and older toolkits), 0x8000 compressed with zstd
(CUDA 13 default), 0x100000 arch-specific target (`sm_90a`), 0x200000 family target
(`sm_100f`). The arch itself is in the header, so listing archs needs no decompression;
`decompress` and `cubin_problem` / `ptx_problem` check payloads (verify asks them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import lz4.block
import zstandard

from condapipe.elf.reader import ElfFile, NotElf
from condapipe.elf.scan import EM_CUDA

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
KIND_PTX = 1
KIND_ELF = 2
FLAG_COMPRESSED_LZ4 = 0x2000
FLAG_COMPRESSED_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_LZ4_MAX_RATIO = 255
_LZ4_MAX_BLOCK = 0x7E000000  # LZ4_MAX_INPUT_SIZE (lz4.h)


class FatbinError(ValueError):
    """The fatbin data is malformed."""


@dataclass(frozen=True)
class FatbinEntry:
    """One code object: SASS (`sm_80`) or PTX (`compute_86`)."""

    kind: int
    arch: int  # 80, 90, 100, ...
    suffix: str  # "", "a" or "f"
    flags: int
    offset: int  # file offset of the payload
    size: int  # payload bytes as stored (padded)
    compressed_size: int
    uncompressed_size: int

    @property
    def compression(self) -> str | None:
        if self.flags & FLAG_COMPRESSED_ZSTD:
            return "zstd"
        if self.flags & FLAG_COMPRESSED_LZ4:
            return "lz4"
        return None

    @property
    def name(self) -> str:
        """`sm_90a` for SASS, `compute_90a` for PTX (nvcc's -gencode spelling)."""
        prefix = "sm" if self.kind == KIND_ELF else "compute"
        return f"{prefix}_{self.arch}{self.suffix}"


@dataclass(frozen=True)
class FatbinReport:
    """All code objects of one ELF file's fatbin sections."""

    entries: tuple[FatbinEntry, ...] = field(default_factory=tuple)

    @property
    def sass(self) -> frozenset[str]:
        return frozenset(e.name for e in self.entries if e.kind == KIND_ELF)

    @property
    def ptx(self) -> frozenset[str]:
        return frozenset(e.name for e in self.entries if e.kind == KIND_PTX)

    @property
    def compressed(self) -> int:
        return sum(1 for e in self.entries if e.compression)

    def to_dict(self) -> dict[str, object]:
        return {
            "sass": sorted(self.sass),
            "ptx": sorted(self.ptx),
            "entries": len(self.entries),
            "compressed_entries": self.compressed,
        }


def parse_fatbin(data: bytes | memoryview, base_offset: int = 0) -> list[FatbinEntry]:
    """Entries of every container in a fatbin section's bytes (compressed ones included)."""
    entries: list[FatbinEntry] = []
    pos = 0
    end_all = len(data)
    while pos + _CONTAINER.size <= end_all:
        magic, _version, header_size, payload_size = _CONTAINER.unpack_from(data, pos)
        if magic != FATBIN_MAGIC:
            # Containers are 8-aligned and the tail is zero padding; anything else is corrupt.
            if any(bytes(data[pos : pos + 8])):
                raise FatbinError(f"bad fatbin magic at section offset {pos:#x}")
            pos += 8
            continue
        if header_size < _CONTAINER.size:
            raise FatbinError(f"fatbin container at {pos:#x} has a {header_size}-byte header")
        entry_pos = pos + header_size
        end = entry_pos + payload_size
        if end > end_all:
            raise FatbinError(f"fatbin container at {pos:#x} runs past the section end")
        while entry_pos + _ENTRY.size <= end:
            entries.append(_entry(data, entry_pos, end, base_offset))
            hdr_size, size = struct.unpack_from("<IQ", data, entry_pos + 4)
            entry_pos += hdr_size + size
        pos = end
    return entries


def _entry(data: bytes | memoryview, pos: int, end: int, base_offset: int) -> FatbinEntry:
    (kind, _ver, hdr_size, size, comp_size, _u, _minor, _major, arch, _noff, _nlen, flags, _z,
     uncomp) = _ENTRY.unpack_from(data, pos)  # fmt: skip
    if kind not in (KIND_PTX, KIND_ELF) or hdr_size < _ENTRY.size or pos + hdr_size + size > end:
        raise FatbinError(f"malformed fatbin entry at section offset {pos:#x}")
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return FatbinEntry(
        kind=kind,
        arch=arch,
        suffix=suffix,
        flags=flags,
        offset=base_offset + pos + hdr_size,
        size=size,
        compressed_size=comp_size if flags & (FLAG_COMPRESSED_LZ4 | FLAG_COMPRESSED_ZSTD) else size,
        uncompressed_size=uncomp if uncomp else size,
    )


def iter_fatbin_sections(elf: ElfFile) -> Iterator[tuple[int, int]]:
    """(file offset, size) of each fatbin section in the file."""
    for sec in elf.sections():
        if sec.name in FATBIN_SECTIONS and sec.type != 8:  # 8: SHT_NOBITS
            yield sec.offset, sec.size


def read_fatbin(path: Path | str) -> FatbinReport:
    """Fatbin report of one ELF file (empty report when it has no device code)."""
    try:
        with ElfFile(path) as elf:
            entries: list[FatbinEntry] = []
            for offset, size in iter_fatbin_sections(elf):
                view = memoryview(elf.mm)
                part = view[offset : offset + size]
                try:
                    entries.extend(parse_fatbin(part, offset))
                finally:  # the mapping cannot close while a view of it lives (e.g. in a traceback)
                    part.release()
                    view.release()
            return FatbinReport(tuple(entries))
    except struct.error as exc:
        raise FatbinError(f"{path}: truncated fatbin ({exc})") from exc
    except NotElf:
        return FatbinReport()


def decompress(path: Path | str, entry: FatbinEntry) -> bytes:
    """The payload of one entry, decompressed (a cubin ELF or PTX text)."""
    with open(path, "rb") as fh:
        fh.seek(entry.offset)
        raw = fh.read(entry.compressed_size)
    try:
        if entry.compression == "zstd":
            out = zstandard.ZstdDecompressor().decompress(raw, max_output_size=entry.uncompressed_size)
        elif entry.compression == "lz4":
            out = lz4_block_decompress(raw, entry.uncompressed_size)
        else:
            return raw
    except zstandard.ZstdError as exc:
        raise FatbinError(f"{entry.name}: payload does not decompress ({exc})") from exc
    if len(out) != entry.uncompressed_size:
        raise FatbinError(
            f"{entry.name}: decompressed to {len(out)} bytes, header says {entry.uncompressed_size}"
        )
    return out


def lz4_block_decompress(src: bytes, size: int) -> bytes:
    """Decode one LZ4 block (the format nvcc uses for `-compress-mode=speed`) of at most `size` bytes."""
    # An LZ4 block expands at most ~255x (a match length byte of 255 per input byte) and holds at
    # most LZ4_MAX_INPUT_SIZE bytes: a header claiming more is damaged, and must not make lz4
    # allocate gigabytes.
    if size > min(_LZ4_MAX_RATIO * len(src) + 64, _LZ4_MAX_BLOCK):
        raise FatbinError(f"corrupt LZ4 block: {len(src)} bytes cannot expand to {size}")
    try:
        return lz4.block.decompress(src, uncompressed_size=size)
    except lz4.block.LZ4BlockError as exc:
        raise FatbinError(f"corrupt LZ4 block ({exc})") from exc


def cubin_problem(data: bytes, arch: int) -> str | None:
    """Why `data` is not a well-formed cubin for `arch` (None when it is)."""
    if len(data) < 64 or not data.startswith(b"\x7fELF") or data[4] != 2:
        return "not a 64-bit ELF"
    machine, flags, shoff, shentsize, shnum = (
        struct.unpack_from("<H", data, 18)[0],
        struct.unpack_from("<I", data, 48)[0],
        struct.unpack_from("<Q", data, 40)[0],
        struct.unpack_from("<H", data, 58)[0],
        struct.unpack_from("<H", data, 60)[0],
    )
    if machine != EM_CUDA:
        return f"ELF machine {machine} is not CUDA"
    if arch not in ((flags >> 8) & 0xFF, flags & 0xFF):  # newer ABI: bits 8-15; older: bits 0-7
        return f"cubin e_flags {flags:#x} do not say sm_{arch}"
    if shoff + shentsize * shnum > len(data):
        return "section headers run past the end"
    return None


def ptx_problem(data: bytes, arch: int) -> str | None:
    """Why `data` is not PTX text for `arch` (None when it is)."""
    text = data.rstrip(b"\0")
    if b"\0" in text:
        return "PTX text contains NUL bytes"
    if f".target sm_{arch}".encode() not in text:
        return f"PTX has no .target sm_{arch}"
    return None

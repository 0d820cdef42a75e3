"""Whether an ELF file defines a symbol: what a static library linked into it leaves behind.

A static archive linked into a shared library (magma's libmagma.a into PyTorch's
libtorch_cuda_linalg.so) has no DT_NEEDED entry to see; its functions are defined in the library's
symbol tables (.dynsym when exported, .symtab unless stripped). The name is looked up in the string
table first (one bytes search), and only a table that holds it is walked.
"""

from __future__ import annotations

import struct

from condapipe.elf.reader import SHT_DYNSYM, ElfFile

SHT_SYMTAB = 2
SHN_UNDEF = 0


def defines_symbol(elf: ElfFile, name: str) -> bool:
    """True when `elf` defines `name` (a symbol table entry of that name in a section, not UNDEF)."""
    wanted = name.encode() + b"\0"
    sections = elf.sections()
    for kind in (SHT_DYNSYM, SHT_SYMTAB):
        for table in (s for s in sections if s.type == kind):
            if not 0 < table.link < len(sections):
                continue
            strtab = sections[table.link]
            strings = elf.mm[strtab.offset : strtab.offset + strtab.size]
            starts, at = set(), strings.find(wanted)
            while at >= 0:  # a linker may share a suffix: `magma_init` inside `xmagma_init`
                starts.add(at)
                at = strings.find(wanted, at + 1)
            if starts and _defined_at(elf, table.offset, table.size, starts):
                return True
    return False


def _defined_at(elf: ElfFile, offset: int, size: int, name_offsets: set[int]) -> bool:
    if elf.is64:  # st_name, st_info, st_other, st_shndx, st_value, st_size
        fmt, name_i, shndx_i = elf.endian + "IBBHQQ", 0, 3
    else:  # st_name, st_value, st_size, st_info, st_other, st_shndx
        fmt, name_i, shndx_i = elf.endian + "IIIBBH", 0, 5
    entry = struct.calcsize(fmt)
    end = min(offset + size - size % entry, len(elf.mm))
    if end <= offset:
        return False
    for sym in struct.iter_unpack(fmt, elf.mm[offset:end]):
        if sym[name_i] in name_offsets and sym[shndx_i] != SHN_UNDEF:
            return True
    return False

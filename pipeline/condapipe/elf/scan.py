"""Finding the host ELF files of an unpacked package: what fix patches and verify checks."""

from __future__ import annotations

import os
from pathlib import Path

from condapipe.elf.reader import ElfFile, NotElf, is_elf

EM_CUDA = 190  # cubins are ELF too, but not host code


def elf_files(root: Path, broken: list[str] | None = None) -> list[str]:
    """Host ELF files with a dynamic table (relative posix paths), hard-link duplicates once.

    Files with the ELF magic that cannot be parsed are skipped, and listed in `broken`.
    """
    seen: set[tuple[int, int]] = set()
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir.parts[:1] == ("info",):
            continue
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if full.is_symlink() or not is_elf(full):
                continue
            st = full.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            try:
                with ElfFile(full) as elf:
                    if elf.e_machine == EM_CUDA or elf.e_type not in (2, 3) or not elf.dynamic_entries():
                        continue
            except (NotElf, ValueError):
                if broken is not None:
                    broken.append((rel_dir / name).as_posix())
                continue
            out.append((rel_dir / name).as_posix())
    return out

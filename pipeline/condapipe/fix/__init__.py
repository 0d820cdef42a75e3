"""fix: ELF post-processing (rpaths, vendoring) and package I/O (safe unpack, streaming repack).

Entry points: `fix_package_file` (a package in place, as the plan's fix step does), `fix_package`
(package -> new package), `fix_prefix` (an unpacked tree), with `FixOptions` / `FixReport`;
reading packages: `read_package_info`, `unpack`, `pack` with `PackOptions`. The ELF tools the
verifier shares live in `condapipe.fix.elf`.
"""

from condapipe.fix.fixer import FixOptions, FixReport, fix_package, fix_package_file, fix_prefix
from condapipe.fix.package_io import PackageInfo, PackOptions, pack, read_package_info, unpack

__all__ = [
    "FixOptions",
    "FixReport",
    "PackOptions",
    "PackageInfo",
    "fix_package",
    "fix_package_file",
    "fix_prefix",
    "pack",
    "read_package_info",
    "unpack",
]

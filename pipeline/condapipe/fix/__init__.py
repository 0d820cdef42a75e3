"""fix: the fixing stage — rpaths rewritten, external libraries vendored, the package repacked.

Entry points: `fix_package_file` (a package in place, as the plan's fix step does), `fix_package`
(package -> new package), `fix_prefix` (an unpacked tree), with `FixOptions` / `FixReport`.
Reading ELF files and conda packages is the shared libraries' job (`condapipe.elf`,
`condapipe.package`); fix/ holds only what writes.
"""

from condapipe.fix.fixer import FixOptions, FixReport, fix_package, fix_package_file, fix_prefix

__all__ = [
    "FixOptions",
    "FixReport",
    "fix_package",
    "fix_package_file",
    "fix_prefix",
]

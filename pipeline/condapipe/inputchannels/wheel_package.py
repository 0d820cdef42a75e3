"""What one wheel becomes: a conda package's name, version, build, dependencies and files."""

from __future__ import annotations

from dataclasses import dataclass

from condapipe.package.conda_writer import PackageFile


@dataclass(frozen=True)
class WheelPackage:
    name: str  # conda name
    version: str
    build: str
    depends: tuple[str, ...]
    license: str
    files: tuple[PackageFile, ...]
    origin: str
    # weak run_exports (info/run_exports.json): what a package built against this one then needs
    run_exports: tuple[str, ...] = ()

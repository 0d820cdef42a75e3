"""NVIDIA's CUDA library wheels laid out as conda-forge's packages of the same libraries.

A wheel such as nvidia-cublas keeps its files under `site-packages/nvidia/cu13/{include,lib}`;
conda-forge's libcublas / libcublas-dev keep the same files in the prefix's `lib/` and `include/`,
and the -dev half adds the unversioned `libcublas.so` link a linker looks for. A recipe that asks
for conda-forge's names (libcublas-dev, libcudnn-dev, nccl, ...) and reads headers and libraries
from the prefix then builds the same against conda-forge and against a channel of these wheels.
Which wheels, and their -dev names: data/wheel_packages.yaml `cuda_libraries`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath

from condapipe.errors import UsageError
from condapipe.facts.tables import wheel_cuda_libraries, wheel_cuda_run_export_pins
from condapipe.inputchannels.wheel_package import WheelPackage
from condapipe.package.conda_writer import PackageFile

BUILD = "pypi_wheel_0"  # no file under lib/pythonX.Y: one package serves every Python
_DEV_PREFIXES = ("include/", "lib/cmake/", "lib/pkgconfig/")
_VERSIONED_LIB = re.compile(r"^(?P<stem>lib[^/]*?\.so)\.\d+(\.\d+)*$")


def is_cuda_library(name: str) -> bool:
    return name in wheel_cuda_libraries()


def _conda_path(pkg: WheelPackage, site_packages: str, path: str) -> str | None:
    """Where a wheel file goes in conda-forge's layout; None for the wheel's own bookkeeping."""
    rel = PurePosixPath(path)
    try:
        inside = rel.relative_to(site_packages)
    except ValueError:
        where = f"{pkg.origin}: {path}"
        raise UsageError(f"{where} is outside site-packages: not an NVIDIA library wheel") from None
    parts = inside.parts
    if parts[0].endswith(".dist-info"):
        if len(parts) >= 3 and parts[1] == "licenses":
            return f"share/licenses/{pkg.name}/{'/'.join(parts[2:])}"
        return None  # METADATA, RECORD, WHEEL, INSTALLER: pip's records, not the library
    if parts[0] == "nvidia" and ("__pycache__" in parts or parts[-1] == "__init__.py"):
        return None  # the namespace package's own files (older wheels have them)
    if parts[0] == "nvidia" and len(parts) >= 4:  # nvidia/<folder>/{include,lib,...}/...
        return "/".join(parts[2:])
    raise UsageError(f"{pkg.origin}: {path} is not under nvidia/<library>/; not an NVIDIA library wheel")


def _for_dev(path: str) -> bool:
    """Headers, CMake/pkg-config files and static archives: what only a build reads."""
    return path.startswith(_DEV_PREFIXES) or (path.startswith("lib/") and path.endswith(".a"))


def _unversioned_links(paths: list[str]) -> list[PackageFile]:
    """lib/libX.so -> libX.so.N for each shared library, as a -dev package has them."""
    links: dict[str, PackageFile] = {}
    for path in sorted(paths, key=len):  # libnvrtc.so.13 before a longer libnvrtc.so.13.0
        p = PurePosixPath(path)
        match = _VERSIONED_LIB.match(p.name)
        if str(p.parent) == "lib" and match and f"lib/{match['stem']}" not in paths:
            links.setdefault(f"lib/{match['stem']}", PackageFile(f"lib/{match['stem']}", link_target=p.name))
    return list(links.values())


def run_export(name: str, version: str) -> tuple[str, ...]:
    """What a package built against this library needs at run time, as conda-forge's -dev package
    exports it: `libcublas >=13.1.0.3,<14.0a0` (max_pin x); nothing for a headers-only package."""
    pin = wheel_cuda_run_export_pins()[name]
    if pin is None:
        return ()
    if pin != "x":
        raise UsageError(f"wheel_packages.yaml: {name}: max_pin {pin!r} is not supported (x or null)")
    major = version.split(".", 1)[0]
    if not major.isdigit():
        raise UsageError(f"{name} {version}: a CUDA library version must start with its major number")
    return (f"{name} >={version},<{int(major) + 1}.0a0",)


def cuda_library_packages(
    pkg: WheelPackage, site_packages: str, python_dependency: str
) -> list[WheelPackage]:
    """The conda-forge packages of one NVIDIA library wheel: the runtime package, and its -dev
    package where conda-forge splits the library (its headers, the unversioned links). The package
    a build links against carries the runtime's run_exports, as conda-forge's does."""
    dev = wheel_cuda_libraries()[pkg.name]
    exports = run_export(pkg.name, pkg.version)
    files: dict[str, PackageFile] = {}
    for f in pkg.files:
        target = _conda_path(pkg, site_packages, f.path)
        if target is not None:
            files[target] = replace(f, path=target)
    depends = tuple(d for d in pkg.depends if d != python_dependency)
    if dev is None:
        links = _unversioned_links(list(files))
        every = sorted([*files.values(), *links], key=lambda f: f.path)
        return [replace(pkg, build=BUILD, depends=depends, files=tuple(every), run_exports=exports)]
    runtime = [f for p, f in files.items() if not _for_dev(p)]
    licenses = [f for p, f in files.items() if p.startswith("share/licenses/")]
    headers = [f for p, f in files.items() if _for_dev(p)]
    dev_files = [
        *headers,
        *_unversioned_links([p for p in files if p.startswith("lib/")]),
        *(replace(f, path=f.path.replace(f"/{pkg.name}/", f"/{dev}/", 1)) for f in licenses),
    ]
    return [
        replace(pkg, build=BUILD, depends=depends, files=tuple(sorted(runtime, key=lambda f: f.path))),
        replace(
            pkg,
            name=dev,
            build=BUILD,
            depends=(f"{pkg.name} =={pkg.version} {BUILD}",),
            files=tuple(sorted(dev_files, key=lambda f: f.path)),
            run_exports=exports,
        ),
    ]

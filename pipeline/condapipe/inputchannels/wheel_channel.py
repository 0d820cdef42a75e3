"""A local channel of host Python packages made from PyPI wheels, and a `python` from this machine.

A recipe's host environment (python, numpy, pyyaml, mkl, ...) is solved from conda channels. A
machine without channel access still has pip: `pip download numpy==2.0.1 mkl==2023.1.0 ... -d DIR`
fetches the same releases as wheels, and a wheel is an archive of the files a package installs
(`site-packages/...`, plus `.data/` trees for scripts, headers and prefix data — Intel ships MKL's
libraries that way, in the layout of its conda packages). condapipe lays each wheel out as a conda
package (files under `lib/pythonX.Y/site-packages`, console scripts as `bin/` launchers with the
prefix placeholder, `Requires-Dist` mapped to conda dependencies for that Python) and indexes the
folder, so the engine solves the recipe unchanged.

CPython itself has no wheel. `python` is made from the interpreter running condapipe as a *venv* of
it (its binary linked under `bin/`, a `pyvenv.cfg` naming its home, no system site-packages): the
standard mechanism `python -m venv` uses, so the host environment gets this CPython X.Y's headers and
ABI and its own `lib/pythonX.Y/site-packages`, and nothing installed beside the interpreter leaks in.
Such a package serves this machine only (its home is an absolute path); what the recipe builds with it
is an ordinary package for CPython X.Y, as with conda-forge's python of the same minor version.
"""

from __future__ import annotations

import email.message
import email.parser
import json
import platform
import re
import stat
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import IO

from packaging.markers import Marker, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.facts.tables import pypi_conda_names, wheel_dev_links
from condapipe.inputchannels.cuda_wheel_layout import cuda_library_packages, is_cuda_library
from condapipe.inputchannels.wheel_bytecode import bytecode_files
from condapipe.inputchannels.wheel_package import WheelPackage
from condapipe.package.channel_index import index_channel
from condapipe.package.conda_writer import PREFIX_PLACEHOLDER, PackageFile, index_json, write_conda
from condapipe.package.safe_extract import STREAM_ERRORS, Budget, Limits
from condapipe.safe_paths import open_regular
from condapipe.value_rules import check_package_part

PYTHON_BUILD = "machine_venv_0"
_WHEEL_NAME = re.compile(
    r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[A-Za-z0-9_.!+]+)(-\d[A-Za-z0-9_.]*)?"
    r"-(?P<py>[A-Za-z0-9_.]+)-(?P<abi>[A-Za-z0-9_.]+)-(?P<plat>[A-Za-z0-9_.]+)\.whl$"
)


@dataclass(frozen=True)
class TargetPython:
    """The CPython the packages are for: `3.12` lays files under lib/python3.12/site-packages."""

    version: str  # X.Y.Z

    @property
    def short(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def tag(self) -> str:
        return "cp" + self.short.replace(".", "")

    @property
    def site_packages(self) -> str:
        return f"lib/python{self.short}/site-packages"

    @property
    def dependency(self) -> str:
        return f"python {self.short}.*"


def running_python() -> TargetPython:
    return TargetPython(platform.python_version())


# ------------------------------------------------------------------------------- python itself


def python_package_files(target: TargetPython) -> tuple[list[PackageFile], Path]:
    """The files of a venv of the running interpreter, and the interpreter's real binary.

    The binary is linked, not copied: a CPython built with a shared libpython finds it through
    `$ORIGIN` of its real location, which a copy would lose.
    """
    real = Path(getattr(sys, "_base_executable", "") or sys.executable).resolve()
    if not real.is_file() or platform.python_implementation() != "CPython":
        raise EnvironmentProblem(
            f"cannot make a python package from {real}: not a CPython binary",
            "run condapipe with the CPython the host environment should use",
        )
    name = f"python{target.short}"
    cfg = (
        f"home = {real.parent}\ninclude-system-site-packages = false\n"
        f"version = {target.version}\nexecutable = {real}\n"
    )
    files = [
        PackageFile(f"bin/{name}", link_target=str(real)),
        PackageFile("bin/python3", link_target=name),
        PackageFile("bin/python", link_target=name),
        PackageFile("pyvenv.cfg", cfg.encode()),
        # An empty site-packages must exist for the venv's site to add it; conda carries no empty
        # folders, so a marker file keeps it (as conda-forge's python keeps README).
        PackageFile(f"{target.site_packages}/README.condapipe", b"Packages of this environment go here.\n"),
    ]
    return files, real


def write_python_package(dest_dir: Path, subdir: str) -> Path:
    target = running_python()
    files, real = python_package_files(target)
    about = {
        "summary": f"A venv of this machine's CPython {target.version} ({real}) for offline host envs",
        "description": "Made by condapipe (wheel-channel); serves the machine it was made on only.",
        "license": "PSF-2.0",
    }
    index = index_json("python", target.version, PYTHON_BUILD, subdir, license_="PSF-2.0")
    return write_conda(dest_dir, index, files, about)


# ------------------------------------------------------------------------------- wheels


def conda_name(pypi_name: str) -> str:
    """The conda-forge name of a PyPI distribution (data/wheel_packages.yaml), else its PEP 503 name."""
    canonical = canonicalize_name(pypi_name)
    return pypi_conda_names().get(canonical, canonical)


def _conda_version(version: str) -> str:
    """PEP 440 to conda: no '-' or '+' (a local label such as +cpu is dropped)."""
    return version.split("+", 1)[0].replace("-", "_")


def _marker_env(target: TargetPython) -> dict[str, str]:
    return {
        "python_version": target.short,
        "python_full_version": target.version,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": "x86_64",
        "extra": "",
    }


def conda_dependency(requirement: str, target: TargetPython) -> str | None:
    """A `Requires-Dist` line as a conda match spec for `target`; None when it does not apply."""
    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        raise UsageError(f"unreadable Requires-Dist {requirement!r}") from None
    if req.marker is not None:
        try:
            if not Marker(str(req.marker)).evaluate(_marker_env(target)):
                return None
        except UndefinedEnvironmentName:
            return None
    specs = [f"{s.operator.replace('===', '==')}{_conda_version(s.version)}" for s in req.specifier]
    return " ".join([conda_name(req.name), ",".join(sorted(specs))]).strip()


def _stable_abi_fits(tag: str, target: TargetPython) -> bool:
    """Whether a `cp3XY` tag of an abi3 wheel is at most the target CPython's version."""
    match = re.fullmatch(r"cp3(\d+)", tag)
    return match is not None and int(match[1]) <= int(target.short.split(".")[1])


def _check_tags(path: Path, py: str, abi: str, plat: str, target: TargetPython) -> None:
    """The wheel's tags must fit the target CPython on linux x86_64 (a cpXY-abi3 wheel: any CPython
    3.XY or newer, the stable ABI's promise, as pip installs it)."""
    tags = set(py.split("."))
    stable = abi == "abi3" and any(_stable_abi_fits(tag, target) for tag in tags)
    if not stable and not tags & {"py3", target.tag, "py" + target.short.replace(".", "")}:
        raise UsageError(f"{path.name}: built for {py}, not for CPython {target.short}")
    if abi not in ("none", "abi3", target.tag) and not abi.startswith(target.tag):
        raise UsageError(f"{path.name}: ABI {abi} does not match CPython {target.short}")
    if plat != "any" and not plat.endswith("x86_64"):
        raise UsageError(f"{path.name}: platform {plat} is not linux x86_64")


def _wheel_name(path: Path, target: TargetPython) -> re.Match[str]:
    """The parts of a wheel's file name, refused unless it is a wheel for `target` (linux x86_64)."""
    match = _WHEEL_NAME.match(path.name)
    if not path.is_file() or match is None:
        raise UsageError(f"{path}: not a wheel file (name-version-python-abi-platform.whl)")
    _check_tags(path, match["py"], match["abi"], match["plat"], target)
    return match


def _member_path(dist_data: str, name: str, posix: str, target: TargetPython) -> str:
    """Where a wheel member goes in the prefix (its .data trees as pip installs them)."""
    parts = PurePosixPath(posix).parts
    if not parts or posix.startswith("/") or ".." in parts or any(p in ("", ".") for p in parts):
        raise UsageError(f"wheel member {posix!r} is not a plain relative path")
    if parts[0] == dist_data and len(parts) >= 3:
        scheme, rest = parts[1], "/".join(parts[2:])
        if scheme in ("purelib", "platlib"):
            return f"{target.site_packages}/{rest}"
        if scheme == "scripts":
            return f"bin/{rest}"
        if scheme == "headers":
            return f"include/python{target.short}/{name}/{rest}"
        if scheme == "data":
            return rest
        raise UsageError(f"wheel member {posix!r}: unknown .data scheme {scheme!r}")
    return f"{target.site_packages}/{posix}"


def _launcher(module: str, attr: str) -> bytes:
    return (
        f"#!{PREFIX_PLACEHOLDER}/bin/python\n"
        "import re\nimport sys\n"
        f"from {module} import {attr.split('.')[0]}\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({attr}())\n"
    ).encode()


def _entry_points(text: str) -> list[tuple[str, str, str]]:
    """console_scripts of entry_points.txt as (script, module, attribute)."""
    section, found = "", []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
        elif section == "console_scripts" and "=" in line:
            script, _, target = (p.strip() for p in line.partition("="))
            module, _, attr = target.partition(":")
            ok = re.fullmatch(r"[A-Za-z0-9_.\-]+", script) and re.fullmatch(r"[A-Za-z_][\w.]*", module)
            if ok and re.fullmatch(r"[A-Za-z_][\w.]*", attr.split()[0] if attr else ""):
                found.append((script, module, attr.split()[0]))
    return found


_SCRIPT_MAX = 1 << 20  # `#!python` scripts are rewritten in memory; larger bin/ files are streamed


def _metadata(wheel: zipfile.ZipFile, path: Path, dist_info: str) -> email.message.Message:
    """The wheel's METADATA, read with a bound (a header file, not a payload)."""
    info = wheel.getinfo(f"{dist_info}/METADATA")
    if info.file_size > _SCRIPT_MAX:
        raise UsageError(f"{path}: METADATA is larger than {_SCRIPT_MAX >> 20} MiB")
    return email.parser.BytesParser().parsebytes(wheel.read(info))


def _identity(meta: email.message.Message, dist_name: str, dist_version: str, path: Path) -> tuple[str, str]:
    """(conda name, conda version) from METADATA, each checked by value_rules before it names a file:
    `Version: 1.0/../../x` would otherwise put the package outside the channel."""
    where = f"{path.name}: METADATA"
    pypi = check_package_part("pypi_name", meta.get("Name") or dist_name, f"{where} Name")
    raw_version = meta.get("Version") or dist_version
    check_package_part("package_version", _conda_version(str(raw_version)), f"{where} Version")
    name = check_package_part("package_name", conda_name(pypi), f"{where} Name")
    return name, _conda_version(str(raw_version))


def _member_opener(path: Path, member: str) -> Callable[[], AbstractContextManager[IO[bytes]]]:
    """Opens one wheel member as a stream, when the package is written (the zip's CRC checks it)."""

    @contextmanager
    def opened() -> Iterator[IO[bytes]]:
        with open_regular(path) as fh, zipfile.ZipFile(fh) as wheel, wheel.open(member) as stream:
            yield stream

    return opened


def _checked_infos(wheel: zipfile.ZipFile, path: Path) -> list[zipfile.ZipInfo]:
    """The wheel's members, each charged to the archive bounds every reader shares (members,
    expanded size, compression ratio: condapipe.package.safe_extract.Limits.for_wheels)."""
    budget = Budget(path, Limits.for_wheels())
    infos = wheel.infolist()
    for info in infos:
        budget.charge(info.filename, 0 if info.is_dir() else info.file_size)
    return infos


def wheel_package(path: Path, target: TargetPython) -> WheelPackage:
    """The conda package of one wheel file for `target`; the archive is read, never extracted, and
    its members are streamed into the package when it is written (never held in memory)."""
    path = Path(path)
    match = _wheel_name(path, target)
    dist_name, dist_version = match["name"], match["version"]
    dist_info, dist_data = f"{dist_name}-{dist_version}.dist-info", f"{dist_name}-{dist_version}.data"
    files: dict[str, PackageFile] = {}
    try:
        with open_regular(path) as fh, zipfile.ZipFile(fh) as wheel:
            infos = _checked_infos(wheel, path)
            meta = _metadata(wheel, path, dist_info)
            name, version = _identity(meta, dist_name, dist_version, path)
            for info in infos:
                if info.is_dir() or stat.S_ISLNK(info.external_attr >> 16):
                    continue
                rel = _member_path(dist_data, canonicalize_name(dist_name), info.filename, target)
                executable = bool((info.external_attr >> 16) & stat.S_IXUSR)
                script = False
                if rel.startswith("bin/") and info.file_size <= _SCRIPT_MAX:
                    data = wheel.read(info)
                    script = data.startswith(b"#!python")
                if script:
                    data = f"#!{PREFIX_PLACEHOLDER}/bin/python".encode() + data[len(b"#!python") :]
                    files[rel] = PackageFile(rel, data, True, has_prefix=True)
                else:
                    opener = _member_opener(path, info.filename)
                    files[rel] = PackageFile(rel, executable=executable, source=opener, size=info.file_size)
            entry_points = f"{dist_info}/entry_points.txt"
            scripts = []
            if entry_points in wheel.namelist():
                if wheel.getinfo(entry_points).file_size > _SCRIPT_MAX:
                    raise UsageError(f"{path}: entry_points.txt is larger than {_SCRIPT_MAX >> 20} MiB")
                scripts = _entry_points(wheel.read(entry_points).decode("utf-8", "replace"))
    except KeyError as exc:
        raise UsageError(f"{path}: not a wheel ({exc.args[0]} missing)") from None
    except UsageError:
        raise
    except STREAM_ERRORS as exc:
        raise UsageError(f"{path}: not a readable wheel ({type(exc).__name__}: {exc})") from None
    for command, module, attr in scripts:
        rel = f"bin/{command}"
        files.setdefault(rel, PackageFile(rel, _launcher(module, attr), True, has_prefix=True))
    installer = f"{target.site_packages}/{dist_info}/INSTALLER"
    files[installer] = PackageFile(installer, b"conda\n")
    for pyc in bytecode_files(files, target.site_packages, target.short):  # as pip would compile them
        files[pyc.path] = pyc
    depends = [target.dependency]
    for line in meta.get_all("Requires-Dist") or ():
        dep = conda_dependency(str(line), target)
        if dep is not None:
            depends.append(dep)
    build = f"{target.tag}_pypi_wheel_0"  # files sit under lib/pythonX.Y: one package per CPython
    return WheelPackage(
        name=name,
        version=version,
        build=build,
        depends=tuple(depends),
        license=str(meta.get("License-Expression") or meta.get("License") or "")[:200],
        files=tuple(files[k] for k in sorted(files)),
        origin=path.name,
    )


@dataclass(frozen=True)
class WheelListing:
    """What a wheel becomes, read from its name, METADATA and member list only (no file contents)."""

    name: str  # conda name
    version: str
    paths: tuple[str, ...]  # where its files go in the prefix
    origin: str


def wheel_listing(path: Path, target: TargetPython) -> WheelListing:
    """The cheap first look at a wheel: every wheel is checked this way before any is packed."""
    path = Path(path)
    match = _wheel_name(path, target)
    dist_name, dist_version = match["name"], match["version"]
    dist_data = f"{dist_name}-{dist_version}.data"
    try:
        with open_regular(path) as fh, zipfile.ZipFile(fh) as wheel:
            infos = _checked_infos(wheel, path)
            meta = _metadata(wheel, path, f"{dist_name}-{dist_version}.dist-info")
            paths = tuple(
                _member_path(dist_data, canonicalize_name(dist_name), i.filename, target)
                for i in infos
                if not i.is_dir() and not stat.S_ISLNK(i.external_attr >> 16)
            )
    except KeyError as exc:
        raise UsageError(f"{path}: not a wheel ({exc.args[0]} missing)") from None
    except UsageError:
        raise
    except STREAM_ERRORS as exc:
        raise UsageError(f"{path}: not a readable wheel ({type(exc).__name__}: {exc})") from None
    name, version = _identity(meta, dist_name, dist_version, path)
    return WheelListing(name, version, paths, path.name)


def dev_links(name: str, version: str, listings: list[WheelListing], origin: str) -> list[PackageFile]:
    """The unversioned library links a -devel package's conda package has (wheel_packages.yaml)."""
    rule = wheel_dev_links().get(name)
    if rule is None:
        return []
    base = next((w for w in listings if w.name == rule["of"] and w.version == version), None)
    if base is None:
        raise UsageError(f"{origin}: {name} needs the {rule['of']} {version} wheel beside it")
    suffix = rule["suffix"]
    return [
        PackageFile(p[: -len(suffix)], link_target=PurePosixPath(p).name)
        for p in base.paths
        if PurePosixPath(p).match(rule["glob"]) and p.endswith(suffix)
    ]


def write_wheel_package(pkg: WheelPackage, dest_dir: Path, subdir: str) -> Path:
    about = {
        "summary": f"{pkg.name} repackaged by condapipe from the PyPI wheel {pkg.origin}",
        "description": "Files of the wheel laid out as a conda package, for offline host environments.",
        "license": pkg.license,
    }
    index = index_json(pkg.name, pkg.version, pkg.build, subdir, pkg.depends, pkg.license)
    extra = {}
    if pkg.run_exports:
        extra["info/run_exports.json"] = json.dumps({"weak": list(pkg.run_exports)}, sort_keys=True).encode()
    return write_conda(dest_dir, index, pkg.files, about, extra_info=extra)


def make_wheel_channel(
    channel_dir: Path, wheels: Sequence[Path], *, with_python: bool = True, subdir: str = "linux-64"
) -> list[Path]:
    """Each wheel as a conda package for the running CPython (and that CPython as `python`); indexed."""
    channel_dir = Path(channel_dir)
    target = running_python()
    listings = [wheel_listing(w, target) for w in wheels]  # every wheel checked before anything is written
    seen: dict[str, str] = {}
    for listing in listings:
        if listing.name in seen:
            raise UsageError(
                f"two wheels of {listing.name}: {seen[listing.name]} and {listing.origin}; keep one"
            )
        seen[listing.name] = listing.origin
        dev_links(listing.name, listing.version, listings, listing.origin)  # its base wheel is there
    written = []
    for wheel in wheels:  # one wheel's bytes in memory at a time
        pkg = wheel_package(wheel, target)
        links = dev_links(pkg.name, pkg.version, listings, pkg.origin)
        if links:
            pkg = replace(pkg, files=tuple(sorted((*pkg.files, *links), key=lambda f: f.path)))
        packages = [pkg]
        if is_cuda_library(pkg.name):  # conda-forge's layout and split (wheel_packages.yaml)
            packages = cuda_library_packages(pkg, target.site_packages, target.dependency)
        try:
            for one in packages:
                written.append(write_wheel_package(one, channel_dir / subdir, subdir))
        except UsageError:
            raise
        except (zipfile.BadZipFile, EOFError, zlib.error) as exc:  # a member damaged past its header
            raise UsageError(f"{wheel}: not a readable wheel ({type(exc).__name__}: {exc})") from None
        except KeyError:  # the file was replaced between the first look and the packing
            raise UsageError(f"{wheel}: the wheel changed while it was read; run again") from None
    if with_python:
        written.append(write_python_package(channel_dir / subdir, subdir))
    (channel_dir / "noarch").mkdir(parents=True, exist_ok=True)
    index_channel(channel_dir)
    return written

"""A local "tool channel": conda packages of cmake and ninja made from their PyPI wheels, offline.

Recipes ask for their build tools (`cmake`, `ninja`) as build requirements, which the engine
solves from conda channels. A machine without channel access (an air-gapped build host, the
lent GPU machine, CI without conda-forge) still has pip, and PyPI's `cmake` and `ninja` wheels
ship ordinary relocatable binaries: `cmake/data/bin/cmake` + `cmake/data/share/cmake-X.Y/`
and `ninja/data/bin/ninja`. condapipe lays those files out as a conda package
(`bin/cmake`, `share/cmake-X.Y/...`), writes the `.conda` file directly (zip of
`metadata.json`, `pkg-*.tar.zst`, `info-*.tar.zst`, as conda-package-handling does) and indexes
the folder with py-rattler, so the engine finds the tools like any other dependency and the
recipe stays the same as on a connected machine.

Sources: the distributions installed in condapipe's own Python environment
(`pip install cmake ninja`), or wheel files (`pip download cmake ninja`). Writes go to a
temporary name and are renamed; a file already at a package's name is kept only when its sha256 is
that of the package made now (the bytes are deterministic), else it is replaced.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import stat
import sysconfig
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.hashing import hash_file
from condapipe.package.channel_index import index_channel
from condapipe.package.conda_writer import PackageFile, index_json, write_conda
from condapipe.package.safe_extract import STREAM_ERRORS, Budget, Limits
from condapipe.safe_paths import open_regular
from condapipe.scratch import scratch_dir

TOOLS = ("cmake", "ninja")
BUILD_STRING = "pypi_wheel_0"
_ARCH = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}


@dataclass(frozen=True)
class ToolFile:
    """One file of a tool: its path inside the conda package, content and mode."""

    path: str  # relative, posix: bin/cmake, share/cmake-4.1/Modules/...
    data: bytes
    executable: bool


@dataclass(frozen=True)
class ToolSource:
    """A tool's files and version, read from an installed distribution or a wheel file."""

    name: str
    version: str
    origin: str  # where the files came from, recorded in info/about.json
    license: str
    files: tuple[ToolFile, ...]


def _data_path(name: str, posix: str) -> str | None:
    """Where a wheel file goes in the conda package, None for files that are not the tool's.

    `cmake/data/bin/cmake` -> `bin/cmake` (the wheel's data tree); newer ninja wheels ship the
    binary as a script, `ninja-1.13.2.data/scripts/ninja` (`../../../bin/ninja` once installed).
    """
    parts = PurePosixPath(posix).parts
    if len(parts) >= 3 and parts[0] == name and parts[1] == "data" and ".." not in parts[2:]:
        return "/".join(parts[2:])
    scripts = len(parts) == 3 and parts[0].startswith(f"{name}-") and parts[0].endswith(".data")
    if (scripts and parts[1] == "scripts") or (parts[-2:] == ("bin", name) and set(parts[:-2]) <= {".."}):
        return f"bin/{parts[-1]}" if parts[-1] == name else None
    return None


def _is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def _add(files: dict[str, ToolFile], rel: str, data: bytes, executable: bool) -> None:
    """The data tree wins over a script of the same name (cmake's console-script wrapper is Python)."""
    if rel in files and _is_elf(files[rel].data):
        return
    if rel.startswith("bin/") and rel in files and not _is_elf(data):
        return
    files[rel] = ToolFile(rel, data, executable)


def _conda_version(version: str) -> str:
    """PEP 440 to conda: conda versions may not contain '-' or '+'."""
    return version.replace("-", "_").split("+", 1)[0]


def from_installed(name: str) -> ToolSource:
    """The tool as pip installed it in this Python environment (`pip install cmake ninja`)."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise EnvironmentProblem(
            f"--build-tools wheels: the {name} wheel is not installed in condapipe's Python environment",
            f"python3 -m pip install {name}   (or use --build-tools channels with a channel that has {name})",
        ) from None
    files: dict[str, ToolFile] = {}
    for entry in _record_entries(dist):
        rel = _data_path(name, entry.as_posix())
        if rel is None:
            continue
        data = _installed_bytes(dist, entry)
        if data is not None:
            _add(files, rel, data[0], data[1])
    origin = f"installed {name} {dist.version} ({dist.locate_file('')})"
    licence = (dist.metadata.get_all("License") or [""])[0] or ""
    return _checked(name, dist.version, origin, licence, files)


def _record_entries(dist: metadata.Distribution) -> list[metadata.PackagePath]:
    """Every file RECORD lists, the ones whose recorded path is missing included.

    `Distribution.files` (Python >= 3.12) drops an entry whose path does not exist as recorded; after
    `pip install --target DIR` a script's `../../bin/ninja` is recorded relative to DIR, so ninja's
    binary vanished from the list wherever DIR/../../bin/ninja did not happen to exist (it did for
    /tmp/x on a machine with /bin/ninja, and not on the GPU machine). _installed_bytes looks for it.
    """
    text = dist.read_text("RECORD")
    if text is None:
        return list(dist.files or ())
    entries = []
    for row in csv.reader(text.splitlines()):
        if not row or not row[0]:
            continue
        entry = metadata.PackagePath(row[0])
        digest = row[1] if len(row) > 1 else ""
        entry.hash = metadata.FileHash(digest) if digest else None  # type: ignore[assignment]
        entry.size = int(row[2]) if len(row) > 2 and row[2].isdigit() else None
        entry.dist = dist
        entries.append(entry)
    return entries


def _installed_bytes(dist: metadata.Distribution, entry: metadata.PackagePath) -> tuple[bytes, bool] | None:
    """The file RECORD lists, only if its content has the recorded sha256.

    Scripts are recorded as `../../bin/ninja`, which `pip install --target` leaves pointing
    outside the target (at /bin/ninja, a different ninja): so also look in the target's bin/ and
    this interpreter's scripts folder, and take only a file whose hash RECORD confirms.
    """
    candidates = [Path(str(dist.locate_file(entry)))]
    if entry.parts[:1] == ("..",):
        candidates += [
            Path(str(dist.locate_file(""))) / "bin" / entry.name,
            Path(sysconfig.get_path("scripts")) / entry.name,
        ]
    want = entry.hash.value if entry.hash is not None and entry.hash.mode == "sha256" else None
    for full in candidates:
        if full.is_symlink() or not full.is_file():
            continue
        data = full.read_bytes()
        if want is not None:
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if digest != want:
                continue
        elif entry.parts[:1] == ("..",):
            continue  # unverifiable file outside the distribution
        return data, bool(full.stat().st_mode & stat.S_IXUSR)
    return None


def from_wheel(path: Path, name: str) -> ToolSource:
    """The tool from a wheel file (`pip download cmake`); the archive is read, never extracted."""
    path = Path(path)
    if not path.is_file() or path.suffix != ".whl":
        raise UsageError(f"{path}: not a wheel file")
    dist_version = path.name.split("-")[1] if path.name.count("-") >= 4 else ""
    files: dict[str, ToolFile] = {}
    budget = Budget(path, Limits.for_wheels())  # the bounds every archive reader shares
    try:
        with open_regular(path) as fh, zipfile.ZipFile(fh) as wheel:
            infos = wheel.infolist()
            for info in infos:
                budget.charge(info.filename, 0 if info.is_dir() else info.file_size)
            for info in infos:
                rel = _data_path(name, info.filename)
                if rel is None or info.is_dir():
                    continue
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    continue
                _add(files, rel, wheel.read(info), bool(mode & stat.S_IXUSR))
    except UsageError:
        raise
    except STREAM_ERRORS as exc:
        raise UsageError(f"{path}: not a readable wheel ({type(exc).__name__}: {exc})") from None
    return _checked(name, dist_version, f"wheel {path.name}", "", files)


def _checked(name: str, version: str, origin: str, license_: str, files: dict[str, ToolFile]) -> ToolSource:
    tool = files.get(f"bin/{name}")
    if tool is None or not tool.executable or not _is_elf(tool.data):
        raise UsageError(f"{origin}: no {name} executable (bin/{name}) in it; not a {name} wheel")
    if not version:
        raise UsageError(f"{origin}: no version")
    return ToolSource(name, _conda_version(version), origin, license_, tuple(files[k] for k in sorted(files)))


def default_sources(names: Iterable[str] = TOOLS) -> list[ToolSource]:
    """Each tool from this Python environment."""
    return [from_installed(n) for n in names]


def installed_versions(names: Iterable[str] = TOOLS) -> dict[str, str]:
    """name -> the conda version its tool package will have, for the tools installed here (no file is
    read: a dry run shows what the tool channel would hold without writing it)."""
    found = {}
    for name in names:
        try:
            found[name] = _conda_version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue
    return found


# ------------------------------------------------------------------------------- writing


def package_name(tool: ToolSource) -> str:
    return f"{tool.name}-{tool.version}-{BUILD_STRING}"


def write_package(tool: ToolSource, subdir_dir: Path, subdir: str) -> Path:
    """Write `<name>-<version>-pypi_wheel_0.conda` into `subdir_dir` (temp name, then rename)."""
    about = {
        "summary": f"{tool.name} repackaged by condapipe from its PyPI wheel (build tool, offline builds)",
        "description": f"Files of {tool.origin}, laid out as a conda package.",
        "license": tool.license,
    }
    files = [PackageFile(f.path, f.data, f.executable) for f in tool.files]
    index = index_json(tool.name, tool.version, BUILD_STRING, subdir, license_=tool.license)
    return write_conda(subdir_dir, index, files, about)


def _same_bytes(existing: Path, made: Path) -> bool:
    """True when `existing` is a regular file (not a link) with the sha256 of `made`."""
    try:
        if not stat.S_ISREG(existing.lstat().st_mode):
            return False
        return hash_file(existing).sha256 == hash_file(made).sha256  # (hashlib.file_digest is 3.11+)
    except OSError:
        return False


def make_tool_channel(
    channel_dir: Path, sources: Iterable[ToolSource], subdir: str = "linux-64"
) -> list[Path]:
    """Write each tool's package into `channel_dir/<subdir>/` (kept when already there) and index."""
    channel_dir = Path(channel_dir)
    written = []
    for tool in sources:
        folder = channel_dir / subdir
        dest = folder / f"{package_name(tool)}.conda"
        if dest.is_symlink() or (dest.exists() and not dest.is_file()):
            raise UsageError(f"{dest}: not a regular file; remove it so condapipe can write the tool package")
        folder.mkdir(parents=True, exist_ok=True)
        # The package is the same bytes every time (conda_writer is deterministic): a file already
        # at its name is kept only when its sha256 is that of the package made now; anything else
        # there (an older build, a planted package) is replaced before the channel is indexed.
        with scratch_dir(".tool-package-", folder) as scratch:
            made = write_package(tool, Path(scratch), subdir)
            if not _same_bytes(dest, made):
                os.replace(made, dest)
        written.append(dest)
    index_channel(channel_dir)
    return written

"""Write a `.conda` package from files held in memory or on disk, without conda-build.

condapipe makes a few packages itself for offline builds (build tools and host Python packages
repackaged from PyPI wheels, a `python` that is a venv of this machine's interpreter). They must be
ordinary packages any conda client installs: a zip (stored) of `metadata.json`, `pkg-<stem>.tar.zst`
and `info-<stem>.tar.zst`, with `info/index.json`, `info/paths.json`, `info/files` and
`info/about.json`, as conda-package-handling writes them. Tars are deterministic (sorted, mtime 0,
root-owned) and streamed through zstd into temp files, so a wheel of several hundred MB (mkl) is
never held in memory twice; the package is written under a temp name and renamed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import zstandard

from condapipe.scratch import scratch_dir
from condapipe.value_rules import check_package_part

# The prefix placeholder conda and rattler replace in text files at install time.
PREFIX_PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
_ZSTD_LEVEL = 3  # local channels: writing fast matters more than a few % of size
_ARCH = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}


@dataclass(frozen=True)
class PackageFile:
    """One entry of a package: a regular file (`data`, or `size` bytes streamed from `source`) or a
    symbolic link (`link_target`). A streamed file is copied through a bounded buffer: a wheel member
    of several hundred MB is never held in memory."""

    path: str  # relative posix path inside the prefix
    data: bytes = b""
    executable: bool = False
    link_target: str | None = None
    has_prefix: bool = False  # text file holding PREFIX_PLACEHOLDER
    source: Callable[[], AbstractContextManager[IO[bytes]]] | None = None
    size: int = 0  # of a streamed file

    @property
    def mode(self) -> int:
        return 0o777 if self.link_target is not None else (0o755 if self.executable else 0o644)

    @property
    def length(self) -> int:
        return self.size if self.source is not None else len(self.data)


class _Hashing(io.RawIOBase):
    """A reader that hashes what passes through it (paths.json's sha256 of a streamed file)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        self.sha256.update(data)
        buffer[: len(data)] = data
        return len(data)


def index_json(
    name: str, version: str, build: str, subdir: str, depends: Iterable[str] = (), license_: str = ""
) -> dict[str, Any]:
    """The index.json of a package made here: build number 0, the platform taken from the subdir."""
    return {
        "name": name,
        "version": version,
        "build": build,
        "build_number": 0,
        "depends": sorted(set(depends)),
        "license": license_,
        "subdir": subdir,
        "arch": _ARCH.get(subdir),
        "platform": None if subdir == "noarch" else subdir.split("-")[0],
        "timestamp": 0,
    }


def _paths_entry(f: PackageFile, digests: dict[str, str]) -> dict[str, Any]:
    if f.link_target is not None:
        return {"_path": f.path, "path_type": "softlink", "size_in_bytes": len(f.link_target)}
    entry: dict[str, Any] = {
        "_path": f.path,
        "path_type": "hardlink",
        "sha256": digests[f.path],
        "size_in_bytes": f.length,
    }
    if f.has_prefix:
        entry.update(prefix_placeholder=PREFIX_PLACEHOLDER, file_mode="text")
    return entry


def _write_tar_zst(dest: Path, files: Iterable[PackageFile]) -> dict[str, str]:
    """Stream a deterministic tar of `files` through zstd into `dest`; the sha256 of each regular file."""
    digests: dict[str, str] = {}
    compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, threads=-1)
    with (
        dest.open("wb") as raw,
        compressor.stream_writer(raw, closefd=False) as zst,
        tarfile.open(fileobj=zst, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        for f in sorted(files, key=lambda f: f.path):
            info = tarfile.TarInfo(f.path)
            info.mode, info.mtime, info.uid, info.gid = f.mode, 0, 0, 0
            info.uname = info.gname = ""
            if f.link_target is not None:
                info.type, info.linkname = tarfile.SYMTYPE, f.link_target
                tar.addfile(info)
            elif f.source is not None:
                info.size = f.size
                with f.source() as src:
                    hashing = _Hashing(src)
                    tar.addfile(info, io.BufferedReader(hashing, 1 << 20))
                    if src.read(1):  # more bytes than the size the file was announced with
                        raise OSError(f"{f.path}: longer than its recorded size")
                digests[f.path] = hashing.sha256.hexdigest()
            else:
                info.size = len(f.data)
                tar.addfile(info, io.BytesIO(f.data))
                digests[f.path] = hashlib.sha256(f.data).hexdigest()
    return digests


def _entry(name: str) -> zipfile.ZipInfo:
    return zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))


def write_conda(
    dest_dir: Path,
    index: dict[str, Any],
    files: Iterable[PackageFile],
    about: dict[str, Any],
    extra_info: dict[str, bytes] | None = None,
) -> Path:
    """Write `<name>-<version>-<build>.conda` into `dest_dir` (temp name, then rename); its path."""
    files = sorted(files, key=lambda f: f.path)
    name = check_package_part("package_name", index["name"], "package name")
    version = check_package_part("package_version", index["version"], f"{name}: version")
    build = check_package_part("package_build", index["build"], f"{name} {version}: build string")
    stem = f"{name}-{version}-{build}"  # checked: no `/` or `..` can take the file out of dest_dir
    has_prefix = [f for f in files if f.has_prefix]
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / f"{stem}.conda"
    with scratch_dir(f".{stem}.", dest_dir) as scratch:  # removed even by an interrupt
        pkg_tar, info_tar = Path(scratch, "pkg.tar.zst"), Path(scratch, "info.tar.zst")
        digests = _write_tar_zst(pkg_tar, files)
        info: dict[str, bytes] = {
            "info/index.json": json.dumps(index, indent=2, sort_keys=True).encode(),
            "info/paths.json": json.dumps(
                {"paths": [_paths_entry(f, digests) for f in files], "paths_version": 1}, indent=2
            ).encode(),
            "info/files": "".join(f.path + "\n" for f in files).encode(),
            "info/about.json": json.dumps(about, indent=2, sort_keys=True).encode(),
            **(extra_info or {}),
        }
        if has_prefix:
            info["info/has_prefix"] = "".join(
                f"{PREFIX_PLACEHOLDER} text {f.path}\n" for f in has_prefix
            ).encode()
        _write_tar_zst(info_tar, (PackageFile(p, d) for p, d in info.items()))
        tmp = Path(scratch, "package.conda")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
            # fixed entry dates: the same files give the same bytes (the tool channel compares sha256)
            z.writestr(_entry("metadata.json"), json.dumps({"conda_pkg_format_version": 2}))
            for name, part in ((f"pkg-{stem}.tar.zst", pkg_tar), (f"info-{stem}.tar.zst", info_tar)):
                entry = _entry(name)
                entry.file_size = part.stat().st_size
                with part.open("rb") as src, z.open(entry, "w") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        os.chmod(tmp, 0o644)  # a channel server must be able to read it
        os.replace(tmp, dest)
    return dest

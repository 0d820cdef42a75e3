"""`verify`: nothing reaches a channel that is tampered, tied to the build machine, missing a
library, or lacking the GPU archs it promises.

Checks, each producing readable errors (defects) or warnings:
- every file's sha256/size matches `info/paths.json`, and nothing unlisted is shipped;
- RPATH/RUNPATH entries are `$ORIGIN`-relative and stay inside the prefix; no text file
  mentions a build prefix or work directory (declared prefix placeholders excepted);
  no symlink points to an absolute path;
- every `DT_NEEDED` resolves inside the package (through the file's rpath), to a run
  dependency (data/linkage.yaml, a family profile's `linkage:`), or to the platform allowlist;
- a CUDA package whose family links a prerequisite statically (pytorch: magma's libmagma.a on
  linux-64) defines that prerequisite's symbol in one of its ELF files (the family's `linkage:
  static_symbol`), so a build that lost the link (USE_MAGMA off, magma not found) is refused;
- the `.nv_fatbin` SASS/PTX archs of each ELF cover the requested arch list (missing:
  error, extra: warning); in static libraries (libmagma.a) every member object with device
  code must cover it. Without an explicit list the package's own promise is checked: the
  arch list it records in info/about.json (`extra.condapipe`, written by render), else, given
  a CUDA version, the default list of the package's family (condapipe.facts.promise decides).
"""

from __future__ import annotations

import os
import posixpath
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources
from pathlib import Path

from ruamel.yaml import YAML

from condapipe.elf.archive import ArchiveError, is_archive, read_archive_fatbins
from condapipe.elf.fatbin import KIND_ELF, FatbinError, cubin_problem, decompress, ptx_problem, read_fatbin
from condapipe.elf.reader import ElfFile, NotElf
from condapipe.elf.rpath_entries import ORIGIN_PREFIXES, split_rpath
from condapipe.elf.scan import elf_files
from condapipe.elf.symbols import defines_symbol
from condapipe.errors import UsageError
from condapipe.facts.arch import ArchList
from condapipe.facts.families import family_of_package, profile, profiles
from condapipe.facts.promise import package_promise
from condapipe.hashing import FileDigest, hash_file
from condapipe.package import pass_record, tree_record
from condapipe.package.io import (
    load_index,
    load_paths_json,
    package_file,
    package_info_from_index,
    unpack,
)
from condapipe.package.safe_extract import UnsafePackage
from condapipe.scratch import scratch_dir
from condapipe.verify.prefix_exceptions import PrefixExceptions, declared_exceptions, leak_hint

_TEXT_PROBE = 8192
_TEXT_MAX = 64 << 20


@dataclass
class VerifyReport:
    """The verdict on one package: `ok` is False when there is any error."""

    package: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files_checked: int = 0
    elf_files: int = 0
    fatbins: dict[str, dict[str, object]] = field(default_factory=dict)
    archs: str | None = None  # the arch list checked (pytorch spelling), None: no arch check
    archs_source: str | None = None  # where that list came from
    static_links: dict[str, str] = field(default_factory=dict)  # prerequisite -> the ELF it is in
    read_from: str = "package"  # "package" (unpacked), "kept tree" (fix's, same bytes) or "folder"
    # "read": every payload file hashed here; "packing pass": paths.json's hashes were computed from
    # these very bytes as they were packed (--pack-from-stage, condapipe.package.pass_record)
    hashes_from: str = "read"

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, object]:
        return {
            "package": self.package,
            "ok": self.ok,
            "errors": self.errors,
            "warnings": self.warnings,
            "files_checked": self.files_checked,
            "elf_files": self.elf_files,
            "fatbins": self.fatbins,
            "archs": self.archs,
            "archs_source": self.archs_source,
            "static_links": self.static_links,
            "read_from": self.read_from,
        }


@cache
def _linkage() -> dict:
    return YAML(typ="safe").load(resources.files("condapipe.data").joinpath("linkage.yaml").read_text())


def system_libs(platform: str) -> tuple[str, ...]:
    table = _linkage()["system_libs"]
    return tuple(table.get(platform, table["linux-64"]))


def dependency_libs(depends: list[str]) -> tuple[str, ...]:
    """Needed-name globs provided by the run dependencies (`depends` match specs): data/linkage.yaml
    for other projects' packages, each family's profile (`linkage:`) for condapipe's own."""
    table = _linkage()["dependency_libs"]
    out: list[str] = []
    for spec in depends:
        name = re.split(r"[\s<>=!~]", spec.strip(), maxsplit=1)[0]
        out.extend(table.get(name, []))
        for family in profiles():
            if any(fnmatchcase(name, pattern) for pattern in family.linkage.packages):
                out.extend(family.linkage.libraries)
    return tuple(out)


@cache
def _build_path_re() -> re.Pattern[bytes]:
    return re.compile(b"|".join(p.encode() for p in _linkage()["build_path_patterns"]))


def verify_package(
    path: Path | str,
    *,
    archs: ArchList | None = None,
    build_prefixes: tuple[str, ...] = (),
    dep_libs: tuple[str, ...] = (),
    platform: str | None = None,
    deep: bool = False,
    jobs: int = 0,
    cuda: str | None = None,
) -> VerifyReport:
    """Verify a `.conda` / `.tar.bz2` (or an unpacked package folder).

    ``archs``: the CUDA archs the package must hold; None checks what the package promises
    (its recorded list, else the default list of its family for ``cuda``).
    """
    path = Path(path)

    # --pack-from-stage: a package still as its pass wrote it need not have its payload hashed again
    known = None if path.is_dir() else pass_record.trusted(path)
    hashes_known = known is not None and known.payload_hashes_from_pass

    def checks(root: Path) -> VerifyReport:
        return verify_tree(
            root,
            hashes_known=hashes_known,
            archs=archs,
            cuda=cuda,
            build_prefixes=build_prefixes,
            dep_libs=dep_libs,
            platform=platform,
            deep=deep,
            jobs=jobs,
            name=str(path),
        )

    if path.is_dir():
        report = checks(path)
        report.read_from = "folder"
        return report
    package_file(path)
    kept = tree_record.trusted_tree(path)
    if kept is not None:  # the tree fix wrote these very bytes from: no second unpack
        try:
            report = checks(kept)
            report.read_from = "kept tree"
            return report
        except UsageError as exc:
            return VerifyReport(package=str(path), errors=[str(exc).replace(str(kept), str(path))])
    with scratch_dir(".condapipe-verify-") as scratch:  # removed even by an interrupt mid-cleanup
        try:
            root = unpack(path, scratch / "pkg")
        except UnsafePackage as exc:  # a member that would escape, a device, damage: a defect
            return VerifyReport(package=str(path), errors=[str(exc)])
        try:
            return checks(root)
        except UsageError as exc:  # unreadable metadata: name the package, not the scratch folder
            return VerifyReport(package=str(path), errors=[str(exc).replace(str(root), str(path))])


def verify_tree(
    root: Path,
    *,
    archs: ArchList | None = None,
    build_prefixes: tuple[str, ...] = (),
    dep_libs: tuple[str, ...] = (),
    platform: str | None = None,
    deep: bool = False,
    jobs: int = 0,
    name: str | None = None,
    cuda: str | None = None,
    hashes_known: bool = False,
) -> VerifyReport:
    """Verify an unpacked package folder (it must hold info/index.json and info/paths.json).
    `hashes_known`: the folder holds exactly the payload bytes paths.json's hashes were computed
    from (the packing pass's record): sizes are compared, contents not hashed again."""
    report = VerifyReport(package=name or str(root))
    index = load_index(root)
    try:
        package_info_from_index(index, root)
    except UsageError as exc:
        report.errors.append(str(exc).removeprefix(f"{root}: "))
        return report
    platform = platform or index.get("subdir") or "linux-64"
    workers = jobs if jobs > 0 else (os.cpu_count() or 1)
    paths = load_paths_json(root)["paths"]
    _check_hashes(root, paths, report, workers, hashes_known)
    placeholders = {e["_path"]: e["prefix_placeholder"] for e in paths if e.get("prefix_placeholder")}
    broken: list[str] = []
    elves = elf_files(root, broken)
    report.elf_files = len(elves)
    report.errors.extend(f"{rel}: damaged ELF file (headers cannot be read)" for rel in broken)
    allowed = (*system_libs(platform), *dependency_libs(list(index.get("depends", []))), *dep_libs)
    for rel in elves:
        _check_elf(root, rel, allowed, report)
    _check_text_and_links(root, paths, placeholders, build_prefixes, report, declared_exceptions(root))
    archs = _archs_to_check(root, str(index.get("name", "")), archs, cuda, report)
    _check_archive_archs(root, paths, archs, report)
    _check_archs(root, elves, archs, deep, report)
    if archs is not None:  # a CUDA package (it promises archs)
        _check_static_links(root, elves, str(index.get("name", "")), platform, report)
    return report


def _archs_to_check(
    root: Path, name: str, archs: ArchList | None, cuda: str | None, report: VerifyReport
) -> ArchList | None:
    """The given list, else the package's promise (recorded in info/about.json, or --cuda's default)."""
    import json

    if archs is not None:
        report.archs, report.archs_source = archs.torch_arch_list(), "given"
        return archs
    about_file = root / "info" / "about.json"
    about: dict = {}
    if about_file.is_file() and not about_file.is_symlink():
        try:
            loaded = json.loads(about_file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            report.warnings.append("info/about.json is not valid JSON: no recorded arch list read")
        else:
            about = loaded if isinstance(loaded, dict) else {}
    promise = package_promise(name, about, cuda)
    if promise.problem:
        report.errors.append(promise.problem)
    if promise.archs is not None:
        report.archs, report.archs_source = promise.archs.torch_arch_list(), promise.source
    return promise.archs


# -- individual checks --------------------------------------------------------------------


def _check_hashes(
    root: Path, paths: list[dict], report: VerifyReport, workers: int, hashes_known: bool = False
) -> None:
    listed = {e["_path"] for e in paths}
    to_hash = []
    for entry in paths:
        rel = entry["_path"]
        full = root / rel
        kind = entry.get("path_type", "hardlink")
        if kind == "softlink":
            if not full.is_symlink():
                report.errors.append(f"{rel}: listed as a symlink in paths.json but is not one")
        elif kind == "directory":
            if not full.is_dir():
                report.errors.append(f"{rel}: listed directory is missing")
        elif not full.is_file() or full.is_symlink():
            report.errors.append(f"{rel}: listed in paths.json but missing from the package")
        else:
            to_hash.append(entry)
    if hashes_known:  # the recorded sha256 with each file's size as it is here: a stat, no read
        digests = [FileDigest(str(e.get("sha256", "")), (root / e["_path"]).stat().st_size) for e in to_hash]
        report.hashes_from = "packing pass"
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            digests = list(pool.map(lambda e: hash_file(root / e["_path"]), to_hash))
    for entry, digest in zip(to_hash, digests, strict=True):
        rel = entry["_path"]
        sha, size = digest.sha256, digest.size
        if "size_in_bytes" in entry and entry["size_in_bytes"] != size:
            report.errors.append(f"{rel}: size {size} differs from paths.json ({entry['size_in_bytes']})")
        elif entry.get("sha256") and entry["sha256"] != sha:
            report.errors.append(f"{rel}: sha256 differs from paths.json (file was modified)")
    report.files_checked = len(to_hash)
    for dirpath, _dirs, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir.parts[:1] == ("info",):
            continue
        for fname in filenames:
            rel = (rel_dir / fname).as_posix()
            if rel not in listed:
                report.errors.append(f"{rel}: shipped but not listed in paths.json")


def _resolve_dirs(root: Path, rel: str, entries: list[str], report: VerifyReport) -> list[str]:
    """Package-relative folders an rpath reaches; reports entries that are not relocatable."""
    dirs = []
    origin = posixpath.dirname(rel)
    for entry in entries:
        origin_form = next((o for o in ORIGIN_PREFIXES if entry.startswith(o)), None)
        if origin_form is None:
            report.errors.append(
                f"{rel}: rpath entry {entry} is not $ORIGIN-relative (links to the build machine)"
            )
            continue
        target = posixpath.normpath(posixpath.join(origin, entry[len(origin_form) :].lstrip("/")))
        if target == ".." or target.startswith("../"):
            report.errors.append(f"{rel}: rpath entry {entry} leaves the prefix")
            continue
        dirs.append(target)
    return dirs


def _check_elf(root: Path, rel: str, allowed: tuple[str, ...], report: VerifyReport) -> None:
    try:
        with ElfFile(root / rel) as elf:
            info = elf.dynamic_info()
    except (NotElf, ValueError) as exc:
        report.errors.append(f"{rel}: unreadable ELF ({exc})")
        return
    search = split_rpath(info.rpath) + split_rpath(info.runpath)
    dirs = _resolve_dirs(root, rel, search, report)
    for needed in info.needed:
        if "/" in needed:
            report.errors.append(f"{rel}: needs {needed} by path")
            continue
        if any(os.path.lexists(root / d / needed) for d in dirs):
            continue
        if any(fnmatchcase(needed, pat) for pat in allowed):
            continue
        report.errors.append(
            f"{rel}: needs {needed}, found neither in the package (via its rpath), "
            "its run dependencies, nor the system allowlist"
        )


def _check_static_links(root: Path, elves: list[str], name: str, platform: str, report: VerifyReport) -> None:
    """Each prerequisite the package's family links statically on `platform` is in some ELF file."""
    family = family_of_package(name)
    if family is None:
        return
    for prerequisite in profile(family).prerequisites_on(platform):
        symbol = profile(prerequisite).linkage.static_symbol
        if symbol is None:
            continue
        found = next((rel for rel in elves if _defines(root / rel, symbol)), None)
        if found is None:
            report.errors.append(
                f"{prerequisite} is not linked: a CUDA {family} package for {platform} links it "
                f"statically, and no ELF file defines {symbol}"
            )
        else:
            report.static_links[prerequisite] = found


def _defines(path: Path, symbol: str) -> bool:
    try:
        with ElfFile(path) as elf:
            return defines_symbol(elf, symbol)
    except (NotElf, OSError, struct.error):
        return False


def _is_text(full: Path) -> bool:
    with open(full, "rb") as fh:
        head = fh.read(_TEXT_PROBE)
    return b"\0" not in head


def _check_text_and_links(
    root: Path,
    paths: list[dict],
    placeholders: dict[str, str],
    build_prefixes: tuple[str, ...],
    report: VerifyReport,
    declared: PrefixExceptions | None = None,
) -> None:
    explicit = [p.encode() for p in build_prefixes if p]
    declared = declared or PrefixExceptions()
    for entry in paths:
        rel = entry["_path"]
        full = root / rel
        if full.is_symlink():
            target = os.readlink(full)
            if target.startswith("/"):
                report.errors.append(f"{rel}: symlink to absolute path {target}")
            continue
        if not full.is_file() or full.stat().st_size > _TEXT_MAX or not _is_text(full):
            continue
        data = full.read_bytes()
        if rel in placeholders:  # text or binary mode: the engine rewrites it at install time
            data = data.replace(placeholders[rel].encode(), b"")
        hits = [p.decode() for p in explicit if p in data]
        match = _build_path_re().search(data)
        if match:
            hits.append(match.group(0).decode("utf-8", "replace"))
        if hits and declared.covers(rel):
            report.warnings.append(
                f"{rel}: mentions the build machine path {hits[0]} (declared in {declared.declared_in})"
            )
        elif hits:
            report.errors.append(f"{rel}: mentions the build machine path {hits[0]}; {leak_hint(rel)}")


def _check_archs(
    root: Path, elves: list[str], archs: ArchList | None, deep: bool, report: VerifyReport
) -> None:
    want_sass = archs.sass() if archs is not None else frozenset()
    want_ptx = archs.ptx() if archs is not None else frozenset()
    for rel in elves:
        try:
            fat = read_fatbin(root / rel)
        except FatbinError as exc:
            report.errors.append(f"{rel}: {exc}")
            continue
        if not fat.entries:
            continue
        report.fatbins[rel] = fat.to_dict()
        if deep:
            _check_payloads(root / rel, rel, fat.entries, report)
        if archs is None:
            continue
        missing = sorted(want_sass - fat.sass) + sorted(want_ptx - fat.ptx)
        extra = sorted(fat.sass - want_sass) + sorted(fat.ptx - want_ptx)
        if missing:
            report.errors.append(f"{rel}: missing CUDA archs {', '.join(missing)} (has {_has(fat)})")
        if extra:
            report.warnings.append(f"{rel}: extra CUDA archs {', '.join(extra)} not in the arch list")
    if archs is not None and len(archs) and not report.fatbins:
        report.warnings.append("arch list given but no ELF file in the package contains CUDA device code")


def _check_archive_archs(root: Path, paths: list[dict], archs: ArchList | None, report: VerifyReport) -> None:
    """Static libraries (libmagma.a): every member object with device code must hold the arch list."""
    want_sass = archs.sass() if archs is not None else frozenset()
    want_ptx = archs.ptx() if archs is not None else frozenset()
    for entry in paths:
        rel = entry["_path"]
        full = root / rel
        if entry.get("path_type", "hardlink") != "hardlink" or full.is_symlink() or not is_archive(full):
            continue
        try:
            lib = read_archive_fatbins(full)
        except (ArchiveError, OSError) as exc:
            report.errors.append(f"{rel}: unreadable static library ({str(exc).replace(str(full), rel)})")
            continue
        if not lib.device:
            continue
        report.fatbins[rel] = lib.to_dict()
        if archs is None:
            continue
        lacking = [(name, fat) for name, fat in lib.device if (want_sass - fat.sass) or (want_ptx - fat.ptx)]
        if lacking:
            missing = sorted(set().union(*((want_sass - f.sass) | (want_ptx - f.ptx) for _, f in lacking)))
            name, fat = lacking[0]
            report.errors.append(
                f"{rel}: {len(lacking)} of {len(lib.device)} objects with device code lack CUDA archs "
                f"{', '.join(missing)} (e.g. {name} has {_has(fat)})"
            )
        extra = sorted((lib.sass - want_sass) | (lib.ptx - want_ptx))
        if extra:
            report.warnings.append(f"{rel}: extra CUDA archs {', '.join(extra)} not in the arch list")


def _has(fat: object) -> str:
    sass = sorted(getattr(fat, "sass", ()))
    ptx = sorted(getattr(fat, "ptx", ()))
    return ", ".join([*sass, *ptx]) or "nothing"


def _check_payloads(path: Path, rel: str, entries: tuple, report: VerifyReport) -> None:
    for entry in entries:
        try:
            data = decompress(path, entry)
        except FatbinError as exc:
            report.errors.append(f"{rel}: {entry.name} payload is corrupt ({exc})")
            continue
        problem = cubin_problem(data, entry.arch) if entry.kind == KIND_ELF else ptx_problem(data, entry.arch)
        if problem:
            report.errors.append(f"{rel}: {entry.name} payload is corrupt ({problem})")

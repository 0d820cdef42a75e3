"""`fix`: make every ELF file of a package or prefix relocatable, in parallel.

Per file: the rpath from the family's rules (condapipe.fix.rpath), needed names of vendored
libraries replaced, written by the cheapest patcher that can (condapipe.fix.patchers).
For a package file: unpack, fix, refresh paths.json, repack the same format, rename over
the original (or write to another folder) — never a half-written package.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from condapipe.elf.reader import DT_RPATH, DT_RUNPATH, ElfFile, is_elf
from condapipe.elf.scan import elf_files
from condapipe.errors import BuildFailed, UsageError
from condapipe.fix.patchers import RPATH, Change, PatchError, apply_change
from condapipe.fix.rpath import RpathRules, decide, rules_for, same_search_path
from condapipe.hashing import FileDigest, hash_file
from condapipe.package import pass_record, tree_record
from condapipe.package.info_records import ABOUT, RENDERED, rewrite_info, rewrite_records
from condapipe.package.io import (
    CONDA,
    PackOptions,
    Progress,
    info_names,
    load_index,
    load_paths_json,
    pack,
    package_file,
    package_format,
    package_info_from_index,
    read_index,
    read_info_file,
    recompress,
    unpack,
    update_paths_json,
)
from condapipe.package.pass_record import PassRecord
from condapipe.scratch import scratch_dir


@dataclass(frozen=True)
class FixOptions:
    """How to fix: rules of the package family, DT_RPATH or DT_RUNPATH, patcher, vendoring."""

    rules: RpathRules = field(default_factory=lambda: rules_for("default"))
    tag: str = RPATH
    patcher: str = "auto"
    build_prefixes: tuple[str, ...] = ()
    vendor: tuple[Path, ...] = ()
    jobs: int = 0  # 0: one per core
    dry_run: bool = False

    def workers(self) -> int:
        return self.jobs if self.jobs > 0 else (os.cpu_count() or 1)


@dataclass
class FileFix:
    """What happened to one ELF file."""

    path: str
    old_rpath: str | None
    new_rpath: str
    tag: str
    replaced_needed: list[tuple[str, str]] = field(default_factory=list)
    patcher: str | None = None  # None: already correct, nothing written
    error: str | None = None


@dataclass
class FixReport:
    target: str
    dry_run: bool
    files: list[FileFix] = field(default_factory=list)
    vendored: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    output: str | None = None
    elapsed_s: float = 0.0
    # How the output package was written: "repacked" (a payload file changed), "info-rewritten"
    # (only info records changed: the payload's zstd stream copied as the engine wrote it),
    # "recompressed" (packed at another level than asked: nothing changed, the level did), "copied",
    # "linked" (a hard link of the package: same file), "unchanged" (nothing written), None (dry run).
    written: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase: unpack, fix, write
    # True: the ELF files were fixed by the staged fix before packing, and `files`/`warnings` are its
    # record (carried by the packing pass); the package was not unpacked (fix_package)
    fixed_in_stage: bool = False

    @property
    def changed(self) -> list[FileFix]:
        return [f for f in self.files if f.patcher is not None]

    @property
    def errors(self) -> list[str]:
        return [f"{f.path}: {f.error}" for f in self.files if f.error]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "output": self.output,
            "elf_files": len(self.files),
            "changed": len(self.changed),
            "files": [asdict(f) for f in self.files],
            "vendored": self.vendored,
            "warnings": self.warnings,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "written": self.written,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "fixed_in_stage": self.fixed_in_stage,
        }


def staged_fix_fingerprint(options: FixOptions, code: str) -> dict[str, object]:
    """What makes a staged fix's result the one this fix would reach: the rules, the tag, nothing
    vendored and the code (condapipe.plan.code_inputs.staged_fix_digest). The patcher and the build
    prefixes are left out: they change how a wrong rpath is rewritten, not which one is right."""
    return {
        "rules": repr(options.rules),
        "tag": options.tag,
        "vendor": [str(v) for v in options.vendor],
        "code": code,
    }


# -- vendoring ----------------------------------------------------------------------------


def vendored_name(source: Path, soname: str | None, keep: bool) -> str:
    """`libcupti-1a2b3c4d.so.12`: soname (or file name) with an 8-hex sha256 of the content."""
    base = soname or source.name
    if keep:
        return base
    stem, dot, rest = base.partition(".so")
    return f"{stem}-{hash_file(source).sha256[:8]}{dot}{rest}"


def _vendor_dir(root: Path, rules: RpathRules) -> Path:
    matches = sorted(glob.glob(str(root / rules.vendor_dir)))
    if len(matches) > 1:
        raise UsageError(f"vendor dir {rules.vendor_dir} matches several folders: {matches}")
    if matches:
        return Path(matches[0])
    if any(ch in rules.vendor_dir for ch in "*?["):
        raise UsageError(f"{root}: no folder matches the vendor dir {rules.vendor_dir}")
    return root / rules.vendor_dir


def vendor_libraries(
    root: Path, sources: tuple[Path, ...], rules: RpathRules, *, dry_run: bool = False
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Copy external libraries into the package; returns (needed-name map, records)."""
    mapping: dict[str, str] = {}
    records: list[dict[str, str]] = []
    if not sources:
        return mapping, records
    dest_dir = _vendor_dir(root, rules)
    for src in sources:
        real = Path(os.path.realpath(src))
        if not real.is_file() or not is_elf(real):
            raise UsageError(f"cannot vendor {src}: not an ELF shared library")
        with ElfFile(real) as elf:
            soname = elf.dynamic_info().soname
        new_name = vendored_name(real, soname, rules.keeps_name(soname or real.name))
        dest = dest_dir / new_name
        for old in {src.name, real.name, soname or real.name}:
            if old != new_name:
                mapping[old] = new_name
        records.append({"source": str(src), "path": dest.relative_to(root).as_posix(), "name": new_name})
        if not dry_run:
            dest_dir.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{new_name}.tmp")
            shutil.copyfile(real, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, dest)
    return mapping, records


# -- the per-file pass --------------------------------------------------------------------


def fix_one_file(
    root: Path, rel: str, options: FixOptions, prefixes: tuple[str, ...], mapping: dict[str, str]
) -> tuple[FileFix, list[str]]:
    path = root / rel
    with ElfFile(path) as elf:
        info = elf.dynamic_info()
        tags = {e.tag for e in elf.dynamic_entries()}
    old = info.rpath if info.rpath is not None else info.runpath
    decision = decide(rel, old, options.rules, prefixes=prefixes)
    replaced = [(n, mapping[n]) for n in info.needed if n in mapping]
    want, other = (DT_RPATH, DT_RUNPATH) if options.tag == RPATH else (DT_RUNPATH, DT_RPATH)
    has_right_tag = want in tags and other not in tags
    record = FileFix(rel, old, decision.value, options.tag, replaced)
    if same_search_path(old, decision.value) and has_right_tag and not replaced:
        return record, list(decision.warnings)
    if options.dry_run:
        record.patcher = f"{options.patcher} (dry run)"
        return record, list(decision.warnings)
    change = Change(rpath=decision.value, tag=options.tag, replace_needed=tuple(replaced))
    try:
        record.patcher = apply_change(path, change, options.patcher)
    except (PatchError, OSError) as exc:
        record.error = str(exc)
    return record, list(decision.warnings)


def fix_prefix(root: Path, options: FixOptions, *, prefixes: tuple[str, ...] = ()) -> FixReport:
    """Fix every ELF file below `root` in place (a build prefix or an unpacked package)."""
    start = time.monotonic()
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    report = FixReport(target=str(root), dry_run=options.dry_run)
    all_prefixes = tuple(dict.fromkeys((*options.build_prefixes, *prefixes)))
    mapping, report.vendored = vendor_libraries(root, options.vendor, options.rules, dry_run=options.dry_run)
    files = elf_files(root)
    with ThreadPoolExecutor(max_workers=options.workers()) as pool:
        results = list(pool.map(lambda rel: fix_one_file(root, rel, options, all_prefixes, mapping), files))
    for record, warnings in results:
        report.files.append(record)
        report.warnings.extend(warnings)
    report.elapsed_s = time.monotonic() - start
    return report


# -- packages -----------------------------------------------------------------------------


def declared_prefixes(root: Path) -> tuple[str, ...]:
    """Prefix placeholders the package declares (paths.json) — the build prefix it was made in."""
    try:
        data = load_paths_json(root)
    except UsageError:
        return ()
    return tuple(sorted({e["prefix_placeholder"] for e in data["paths"] if e.get("prefix_placeholder")}))


def _hard_link_groups(root: Path, rels: list[str]) -> dict[str, list[str]]:
    """For each changed file, every other path in the package sharing its inode."""
    inodes: dict[tuple[int, int], list[str]] = {}
    for dirpath, _dirs, filenames in os.walk(root):
        for name in filenames:
            full = Path(dirpath) / name
            if full.is_symlink():
                continue
            st = full.stat()
            if st.st_nlink > 1:
                inodes.setdefault((st.st_dev, st.st_ino), []).append(full.relative_to(root).as_posix())
    out: dict[str, list[str]] = {}
    for rel in rels:
        st = (root / rel).stat()
        out[rel] = inodes.get((st.st_dev, st.st_ino), [rel])
    return out


def fix_package(
    path: Path,
    options: FixOptions,
    *,
    output_dir: Path | None = None,
    pack_options: PackOptions | None = None,
    work_dir: Path | None = None,
    progress: Progress | None = None,
    repack_level: bool = False,
    keep_tree: bool = False,
    records_work_dir: Path | None = None,
    staged_code: str | None = None,
) -> FixReport:
    """Fix a `.conda` / `.tar.bz2`; the result replaces it atomically (or goes to `output_dir`).

    The engine packs at the final level on every core, so the payload is compressed once: when no
    file changed its zstd stream is copied as the engine wrote it (never decompressed and
    compressed again); only the small info tar is rewritten when its records change. Only a fix
    that changes a payload file repacks the package (at `pack_options`' level). `repack_level`:
    the package was packed at another level than `pack_options`' (the level was changed after the
    build step finished): an unchanged `.conda` is recompressed once to that level, not rebuilt.
    With `keep_tree` the unpacked tree the output holds stays beside it
    (condapipe.package.tree_record), so verify need not unpack the same bytes again. With
    `records_work_dir` (condapipe's work dir) the package's info records stop naming it
    (condapipe.package.info_records).

    `staged_code` (condapipe.plan.code_inputs.staged_fix_digest of this code): a package whose pass
    record (condapipe.package.pass_record, --pack-from-stage) says the staged fix ran on exactly the
    payload packed, with this fix's rules, tag and code, is not unpacked: nothing in it is left to
    fix (fix_staged_package). Without it, or any record, every file is checked here as before.
    """
    start = time.monotonic()
    path = package_file(path)
    out_path = (output_dir / path.name) if output_dir else path
    is_conda = package_format(path) == CONDA
    repack_level = repack_level and is_conda
    scratch_parent = work_dir or out_path.parent
    scratch_parent.mkdir(parents=True, exist_ok=True)
    # --pack-from-stage: paths.json's hashes were computed as the payload was packed (None: no record)
    packed = pass_record.trusted(path)
    if (
        staged_code is not None
        and is_conda
        and packed is not None
        and _staged_fix_applies(packed, options, staged_code)
    ):
        report = fix_staged_package(
            path,
            out_path,
            packed,
            pack_options=pack_options,
            progress=progress,
            repack_level=repack_level,
            keep_tree=keep_tree,
            records_work_dir=records_work_dir,
        )
        report.elapsed_s = time.monotonic() - start
        return report
    # removed however this ends, an interrupt mid-removal included (condapipe.scratch)
    with scratch_dir(".condapipe-fix-", scratch_parent) as scratch:
        root = unpack(path, scratch / "pkg")
        # a conda package, not any archive: info/index.json there and naming what a channel accepts
        package_info_from_index(load_index(root, path), path)
        unpacked = time.monotonic()
        report = fix_prefix(root, options, prefixes=declared_prefixes(root))
        level = (pack_options or PackOptions()).zstd_level if repack_level else None
        info = rewrite_info(root, records_work_dir, level) if records_work_dir else []
        report.timings["unpack"] = unpacked - start
        report.timings["fix"] = time.monotonic() - unpacked
        report.target = str(path)
        if report.errors:
            raise BuildFailed(f"fix failed for {path.name}", diagnosis="; ".join(report.errors[:3]))
        written = time.monotonic()
        payload_changed = bool(report.changed or report.vendored)
        if options.dry_run:
            report.output = None
        elif not payload_changed and (repack_level or (info and is_conda)):
            # the tar streams as the engine wrote them; the payload's zstd stream copied untouched
            # unless the level changed after the build
            replaced = {name: (root / name).read_bytes() for name in info}
            recompress(
                path, out_path, pack_options, progress=progress, info_files=replaced, payload=repack_level
            )
            report.written = "recompressed" if repack_level else "info-rewritten"
            report.output = str(out_path)
        elif not payload_changed and not info and out_path != path:
            _copy_atomic(path, out_path)
            report.written = "copied"
            report.output = str(out_path)
        elif payload_changed or info:
            changed = [f.path for f in report.changed]
            groups = _hard_link_groups(root, changed)
            digests = _digests(root, changed, options.workers())
            all_changed = []
            for rel in changed:
                for alias in groups[rel]:
                    digests[alias] = digests[rel]
                    all_changed.append(alias)
            added = [v["path"] for v in report.vendored]
            update_paths_json(root, all_changed, added, digests)
            pack(root, out_path, pack_options, progress=progress)
            report.output = str(out_path)
            report.written = "repacked"
        else:
            report.output = str(path)
            report.written = "unchanged"
        report.timings["write"] = time.monotonic() - written
        if keep_tree and report.output and scratch_parent == out_path.parent:
            # an untouched payload keeps the pass's hashes; the package's digest is taken once, here
            carry = packed is not None and packed.payload_hashes_from_pass and not payload_changed
            digest = tree_record.keep(root, Path(report.output), md5=carry)
            if carry and packed is not None and not options.dry_run:
                staged = packed.staged_fix  # still true of the payload: it was not touched
                pass_record.write(Path(report.output), PassRecord(digest, True, staged))
        if keep_tree and out_path != path:
            tree_record.discard(path)  # the packing pass's tree (--pack-from-stage): not read here
    report.elapsed_s = time.monotonic() - start
    return report


def _staged_fix_applies(packed: PassRecord, options: FixOptions, staged_code: str) -> bool:
    """Whether the record says the staged fix ran on this payload, as this fix would run it."""
    staged = packed.staged_fix
    return (
        packed.payload_hashes_from_pass
        and packed.digest is not None
        and staged is not None
        and not options.dry_run
        and staged.get("fingerprint") == staged_fix_fingerprint(options, staged_code)
        and isinstance(staged.get("files"), list)
    )


def _staged_report(path: Path, staged: dict[str, Any]) -> FixReport:
    """The staged fix's own record of the package's ELF files, as this step's report."""
    report = FixReport(target=str(path), dry_run=False, fixed_in_stage=True)
    try:
        report.files = [
            FileFix(**{**f, "replaced_needed": [tuple(p) for p in f["replaced_needed"]]})
            for f in staged["files"]
        ]
    except (TypeError, KeyError) as exc:
        raise BuildFailed(f"{path.name}: the staged fix's record is not readable ({exc})") from None
    report.warnings = [str(w) for w in staged.get("warnings") or ()]
    return report


def fix_staged_package(
    path: Path,
    out_path: Path,
    packed: PassRecord,
    *,
    pack_options: PackOptions | None,
    progress: Progress | None,
    repack_level: bool,
    keep_tree: bool,
    records_work_dir: Path | None,
) -> FixReport:
    """The fix step for a package whose payload the staged fix already fixed (fix_package's
    `staged_code`): the package is placed into its output, a hard link where the file system
    allows, else a copy; only its info records are read (and rewritten, with the payload's zstd
    stream copied, when they name the work dir or the level changed: as fix_package does). The
    report is the staged fix's; the digests are the pass record's, or hashed once when a new file
    was written. With `keep_tree`, the tree the packing pass kept beside the package (its payload
    folder with the info files; condapipe.package.tree_record) moves beside the output when the
    output holds the same bytes, so verify reads it; otherwise verify unpacks the package itself."""
    staged, known = packed.staged_fix, packed.digest
    if staged is None or known is None:  # fix_package checked both (_staged_fix_applies)
        raise BuildFailed(f"{path.name}: no staged fix or digest in its pass record")
    start = time.monotonic()
    package_info_from_index(read_index(path), path)  # a conda package, whose name a channel accepts
    report = _staged_report(path, staged)
    level = (pack_options or PackOptions()).zstd_level if repack_level else None
    replaced: dict[str, bytes] = {}
    if records_work_dir:  # read from the small info member only (the payload is not read)
        names = info_names(path)
        records = {name: read_info_file(path, name) for name in (ABOUT, RENDERED) if name in names}
        replaced = rewrite_records(records, records_work_dir, level)
    report.timings["read info"] = time.monotonic() - start
    written = time.monotonic()
    if keep_tree and out_path != path:
        tree_record.discard(out_path)  # an earlier run's tree is not this package's
    if repack_level or replaced:
        recompress(path, out_path, pack_options, progress=progress, info_files=replaced, payload=repack_level)
        report.written = "recompressed" if repack_level else "info-rewritten"
        digest = hash_file(out_path, md5=True)
    elif out_path != path:
        report.written = _link_or_copy(path, out_path)
        digest = known
    else:
        report.written, digest = "unchanged", known
    report.output = str(out_path)
    if report.written != "unchanged":
        pass_record.write(out_path, PassRecord(digest, True, staged))
    if keep_tree and report.written in ("linked", "copied") and tree_record.trusted_tree(path):
        tree_record.move_with(path, out_path)  # the packing pass's tree of these very bytes
    elif keep_tree and report.written != "unchanged":
        tree_record.discard(path)  # not these bytes' tree (verify unpacks the package)
    report.timings["write"] = time.monotonic() - written
    return report


def _link_or_copy(src: Path, dest: Path) -> str:
    """Place `src` at `dest` through a temporary sibling and a rename: a hard link (the same file,
    nothing read) where the file system allows, else a copy. Returns "linked" or "copied"."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        _copy_atomic(src, dest)
        return "copied"
    try:
        os.replace(tmp, dest)
    except OSError as exc:
        raise BuildFailed(f"cannot write {dest}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return "linked"


def _copy_atomic(src: Path, dest: Path) -> None:
    """Copy through a temporary sibling and a rename: `dest` is never half written."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except OSError as exc:
        raise BuildFailed(f"cannot write {dest}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _digests(root: Path, rels: list[str], workers: int) -> dict[str, FileDigest]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(rels, pool.map(lambda r: hash_file(root / r), rels), strict=True))


def fix_package_file(
    path: Path,
    *,
    family: str | None = None,
    extra_rpaths: tuple[str, ...] = (),
    vendor: tuple[Path, ...] = (),
    tag: str = RPATH,
    patcher: str = "auto",
    pack_options: PackOptions | None = None,
    output_dir: Path | None = None,
    repack_level: bool = False,
    keep_tree: bool = False,
    records_work_dir: Path | None = None,
    staged_code: str | None = None,
) -> FixReport:
    """For the pipeline: fix one built package with its family's rules, in place or into
    `output_dir` (atomic); `repack_level`, `keep_tree`, `records_work_dir`, `staged_code`: see
    `fix_package`."""
    rules = rules_for(family).with_extra(extra_rpaths)
    return fix_package(
        Path(path),
        FixOptions(rules=rules, tag=tag, patcher=patcher, vendor=tuple(vendor)),
        pack_options=pack_options,
        output_dir=output_dir,
        repack_level=repack_level,
        keep_tree=keep_tree,
        records_work_dir=records_work_dir,
        staged_code=staged_code,
    )

"""Move the build's new files out of the staged prefix, for condapipe to pack them itself.

Why (issue 35, opt-in `pack_from_stage`): rattler-build's packing copies every new file into a
temp folder, hashes and scans it and tars it: ~45-50 s at 3.4 GB on 16 cores before any
compression, which alone puts an engine-packed path over 1.15x one `tar | zstd -T0` pass. With the
payload moved out (a rename on the same file system: no bytes copied) the engine finds no new files
and packs only the metadata it owns (index.json, about.json, hash_input.json, run_exports.json,
recipe/, test/); condapipe.package.stage_pack then writes the payload in one streaming pass (tar,
hash, prefix scan and compression together) and paths.json by the engine's rules.

The new files are rattler-build's: those no host package's conda-meta record lists
(condapipe.fix.staged.host_files) and that were not already there when the build script started
(the engine snapshots the prefix after installing the host packages: rattler's CACHEDIR.TAG, a
post-link script's output). The staged fix cannot read that snapshot; it compares each file's
ctime (which no script can set back) with that of the build script the engine wrote just before
running it. The file system's clock is coarse (a few ms), so a file in the same tick is
ambiguous: the installer's cache-directory tag is recognised by its standard signature, anything
else is refused with one line (build without --pack-from-stage) rather than guessed. Directories
that hold no host file are removed once empty, so the engine sees the prefix as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from condapipe.elf.scan import elf_files
from condapipe.errors import UsageError
from condapipe.fix.fixer import FixOptions, FixReport, staged_fix_fingerprint
from condapipe.fix.staged import host_files
from condapipe.package.io import write_atomic
from condapipe.package.stage_layout import (
    ENGINE_WORK_DIR,
    FIX_RECORD,
    PAYLOAD,
    PREFIX_FILE,
    REQUEST,
    STAGE_DIR,
)

_SEARCH_DEPTH = 4  # how far above the prefix the engine's output folder may be


def requested_stage(prefix: Path) -> Path | None:
    """The stage folder the engine adapter asked for above `prefix`, or None (the engine packs)."""
    for parent in list(prefix.resolve().parents)[:_SEARCH_DEPTH]:
        if (parent / STAGE_DIR / REQUEST).is_file():
            return parent / STAGE_DIR
    return None


_SCRIPT_FILES = ("build_env.sh", "conda_build.sh")  # rattler-build writes them after installing the host


# The Cache Directory Tagging spec's first line: rattler's installer writes such a tag into a prefix.
_CACHEDIR_TAG = ("CACHEDIR.TAG", b"Signature: 8a477f597d28d172789f06886806bc55")


def _installers_tag(rel: str, path: Path) -> bool:
    if rel != _CACHEDIR_TAG[0] or not path.is_file() or path.is_symlink():
        return False
    with path.open("rb") as fh:
        return fh.read(len(_CACHEDIR_TAG[1])) == _CACHEDIR_TAG[1]


def script_written_at(src_dir: Path) -> int:
    """The ctime (ns) of the build script the engine wrote into `src_dir` ($SRC_DIR) once the host
    packages were installed: a file whose ctime is earlier was there before the script ran."""
    times = [p.stat().st_ctime_ns for name in _SCRIPT_FILES if (p := src_dir / name).is_file()]
    if not times:
        raise UsageError(f"{src_dir}: no build script of the engine's ({', '.join(_SCRIPT_FILES)})")
    return max(times)


def move_payload_out(prefix: Path, stage: Path, script_start: int | None = None) -> tuple[int, list[str]]:
    """Move every new file and symlink of `prefix` under `stage/payload`: how many were moved, and
    the files no host record lists that were left as already there before the script.
    `script_start`: a file whose ctime (epoch ns) is earlier already existed (default:
    script_written_at of the engine's work folder beside the prefix, its $SRC_DIR)."""
    if not prefix.is_dir():
        raise UsageError(f"{prefix}: not a directory")
    payload = stage / PAYLOAD
    if payload.exists():
        raise UsageError(f"{payload}: already holds a payload")
    installed = host_files(prefix)
    if script_start is None:  # the layout, not $SRC_DIR: only the settings and engines read the environment
        script_start = script_written_at(prefix.resolve().parent / ENGINE_WORK_DIR)
    kept_dirs = {str(Path(rel).parent) for rel in installed} | {"conda-meta"}
    kept_dirs |= {str(p) for rel in list(kept_dirs) for p in Path(rel).parents}
    moved, kept = 0, []
    for dirpath, dirnames, names in os.walk(prefix):
        rel_dir = Path(dirpath).relative_to(prefix)
        if rel_dir.parts[:1] == ("conda-meta",):
            dirnames.clear()
            continue
        # a symlink to a directory is a member, not a folder to descend into
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if d not in links]
        for name in [*names, *links]:
            rel = (rel_dir / name).as_posix()
            if rel in installed:
                continue
            ctime = os.lstat(Path(dirpath) / name).st_ctime_ns
            if ctime < script_start or _installers_tag(rel, Path(dirpath) / name):
                kept.append(rel)
                continue
            if ctime == script_start:  # never guessed: a wrong guess changes the package silently
                raise UsageError(
                    f"{rel}: made in the clock tick the engine wrote its build script; cannot tell "
                    "whether it was there before the script (build without --pack-from-stage)"
                )
            dest = payload / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(Path(dirpath) / name, dest)
            except OSError:  # another file system: a copy, then the original goes
                shutil.move(Path(dirpath) / name, dest)
            moved += 1
    for dirpath, _dirs, _names in sorted(os.walk(prefix, topdown=False), key=lambda w: -len(w[0])):
        rel_dir = Path(dirpath).relative_to(prefix)
        if str(rel_dir) != "." and str(rel_dir) not in kept_dirs and not os.listdir(dirpath):
            os.rmdir(dirpath)
    stage.mkdir(parents=True, exist_ok=True)  # a build that added nothing still leaves a stage
    (stage / PREFIX_FILE).write_text(str(prefix), encoding="utf-8")
    return moved, sorted(kept)


def record_fix(stage: Path, report: FixReport, options: FixOptions, code: str) -> Path | None:
    """Write, beside the payload just moved, what the staged fix did to it: the record of each ELF
    file of the payload, its warnings, and the fingerprint of the fix it ran (`options`' rules and
    tag, `code`: condapipe.plan.code_inputs.staged_fix_digest). The packing pass carries it into
    the package's pass record; the fix step takes it instead of unpacking the package to check
    those files again (condapipe.fix.fixer.fix_package). Only after a fix without errors and a
    complete move, and only when every ELF file of the payload is one the fix checked: a hard link
    of a fixed file that a patcher replaced (lief writes a new file) keeps its old bytes under the
    other name, and then nothing is recorded (None) and the fix step checks every file itself."""
    if report.errors:
        raise UsageError(f"{stage}: the staged fix failed; nothing to record")
    payload = stage / PAYLOAD
    recorded = [f for f in report.files if os.path.lexists(payload / f.path)]
    if payload.is_dir() and not set(elf_files(payload)) <= {f.path for f in recorded}:
        return None
    data = {
        "fingerprint": staged_fix_fingerprint(options, code),
        "files": [asdict(f) for f in recorded],
        "warnings": list(report.warnings),
    }
    path = stage / FIX_RECORD
    write_atomic(path, json.dumps(data).encode())
    return path

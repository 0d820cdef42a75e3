"""The fix, run by a family's build.sh on the staged prefix before the engine packs it.

Why: a fix that rewrites a payload file after the engine packed means compressing the payload a
second time (a whole PyTorch at level 19: minutes). Run here, on the files the build installed,
the engine packs the fixed files once and the plan's fix step finds nothing left to change. The
engine's own relocation is off when this runs (the recipe asks for that only while
`CONDAPIPE_STAGED_FIX` is set), so nothing rewrites the rpaths after condapipe's rules did.

The new files are those the host environment's conda-meta records do not list: what both engines
package. `condapipe` itself is not on the build script's PATH, so the plan writes a launcher
(`write_launcher`) that runs `condapipe.cli.staged_fix` with condapipe's interpreter and import
path.
The plan's fix step still checks every file of the package with the rules of the code it runs: a
package whose build ran an older staged fix (a build step is not redone for a code change) is
corrected there, repacked.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

from condapipe.errors import UsageError
from condapipe.facts.families import recipes_override
from condapipe.fix.fixer import FixOptions, FixReport, fix_one_file
from condapipe.fix.rpath import rules_for


def host_files(prefix: Path) -> set[str]:
    """Paths (relative, posix) the host environment's packages installed: conda-meta's records."""
    meta = prefix / "conda-meta"
    listed: set[str] = set()
    for record in sorted(meta.glob("*.json")) if meta.is_dir() else ():
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{record}: not a readable package record ({exc})") from None
        files = data.get("files") if isinstance(data, dict) else None
        listed.update(f for f in files or () if isinstance(f, str))
    return listed


def new_elf_files(prefix: Path) -> list[str]:
    """ELF files with a dynamic table below `prefix` that no host package installed."""
    from condapipe.elf.scan import elf_files

    installed = host_files(prefix)
    return [rel for rel in elf_files(prefix) if rel not in installed and not rel.startswith("conda-meta/")]


def unshare_host_links(prefix: Path) -> int:
    """Give each file the build added that is a hard link of a host package's file its own copy,
    so the fix (an in-place edit) never changes the host file — nor the package cache it is linked
    from. Runs before the ELF scan, which lists one path per inode. Returns how many were copied."""
    installed = host_files(prefix)
    host_inodes = set()
    for rel in installed:
        try:
            st = os.lstat(prefix / rel)
        except OSError:
            continue
        if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):  # never a special file: copying one may hang
            host_inodes.add((st.st_dev, st.st_ino))
    if not host_inodes:
        return 0
    copied = 0
    for dirpath, _dirs, names in os.walk(prefix):
        for name in names:
            path = Path(dirpath) / name
            rel = path.relative_to(prefix).as_posix()
            st = os.lstat(path)
            if rel in installed or (st.st_dev, st.st_ino) not in host_inodes:
                continue
            tmp = path.with_name(f".{name}.condapipe-unshare-{os.getpid()}")
            shutil.copy2(path, tmp)
            os.replace(tmp, path)
            copied += 1
    return copied


def staged_options(family: str | None, build_prefixes: tuple[str, ...] = (), jobs: int = 0) -> FixOptions:
    """How the staged fix fixes: `family`'s rules, the fix step's default tag, nothing vendored."""
    return FixOptions(rules=rules_for(family), build_prefixes=build_prefixes, jobs=jobs)


def fix_staged_prefix(
    prefix: Path, family: str | None, build_prefixes: tuple[str, ...], jobs: int = 0
) -> FixReport:
    """Fix, in place, every ELF file the build added to `prefix`, with `family`'s rules."""
    start = time.monotonic()
    if not prefix.is_dir():
        raise UsageError(f"{prefix}: not a directory")
    options = staged_options(family, build_prefixes, jobs)
    prefixes = tuple(dict.fromkeys((str(prefix), *build_prefixes)))
    report = FixReport(target=str(prefix), dry_run=False)
    from concurrent.futures import ThreadPoolExecutor

    unshare_host_links(prefix)
    files = new_elf_files(prefix)
    with ThreadPoolExecutor(max_workers=options.workers()) as pool:
        results = list(pool.map(lambda rel: fix_one_file(prefix, rel, options, prefixes, {}), files))
    for record, warnings in results:
        report.files.append(record)
        report.warnings.extend(warnings)
    report.elapsed_s = time.monotonic() - start
    return report


# The kernel reads at most this much of a `#!` line (Linux: 256 bytes, the terminator included).
SHEBANG_MAX = 255


def write_launcher(folder: Path) -> Path | None:
    """An executable that runs the staged fix's command with this interpreter and import path,
    ignoring the build script's PYTHON* variables (the build's own Python is another one), and with
    the family registry this process reads (a `recipes_root(...)` folder: the build script's
    --family is a family of that registry, never one the installed registry lacks). Written atomically.
    None where no `#!` line can start this interpreter (a space in its path, a path too long):
    then the engine relocates and the fix step repacks, as for a recipe directory."""
    interpreter = sys.executable
    if not interpreter or any(ch.isspace() for ch in interpreter) or len(interpreter) + 6 > SHEBANG_MAX:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "condapipe-staged-fix"
    paths = [p for p in sys.path if p]
    override = recipes_override()
    recipes = str(override.resolve()) if override is not None else None
    text = (
        f"#!{interpreter} -I\n"
        "# Written by condapipe for its build scripts: the staged fix (condapipe.cli.staged_fix).\n"
        "import sys\n"
        f"sys.path[:0] = {paths!r}\n"
        "from condapipe.cli.staged_fix import main\n"
        f"sys.exit(main(recipes={recipes!r}))\n"
    )
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return path
    tmp = folder / f".{path.name}.tmp-{os.getpid()}"
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path

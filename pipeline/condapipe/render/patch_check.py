"""Dry-run catalog patches against a source tree: applies, already applied, or fails (and where).

A patch that no longer matches upstream should be caught before a multi-hour build starts, with
the hunk that was rejected. The check copies only the files the patches touch into a scratch
directory and applies the selected patches there in order (as the build will), so a later patch
sees the changes of an earlier one and the user's tree is never modified. Patches are applied
with GNU patch at strip level 1 and zero fuzz: a hunk that only applies with fuzz would be
applied differently by conda-build and rattler-build, so it counts as failing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.render.patch_catalog import PatchEntry, diff_target
from condapipe.scratch import scratch_dir

APPLIES = "applies"
ALREADY_APPLIED = "already-applied"
FAILS = "fails"
CONFIG = "config"  # entries without a patch file: nothing to check in the tree

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_FAILED_RE = re.compile(r"Hunk #(\d+) FAILED at (\d+)")
_CHECKING_RE = re.compile(r"^(?:checking|patching) file (.+)$")
_OFFSET_RE = re.compile(r"succeeded at \d+ \(offset (-?\d+) lines?\)")


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff, with its header line and body."""

    file: str
    number: int  # 1-based within its file, as GNU patch counts
    header: str
    text: str  # header + body lines


@dataclass(frozen=True)
class CheckResult:
    """The outcome for one catalog entry."""

    entry_id: str
    status: str  # APPLIES | ALREADY_APPLIED | FAILS | CONFIG
    detail: str = ""  # why it fails, with the rejected hunk(s); offsets when it applies
    rejected: tuple[Hunk, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status != FAILS

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.entry_id,
            "status": self.status,
            "detail": self.detail,
            "rejected_hunks": [{"file": h.file, "hunk": h.number, "text": h.text} for h in self.rejected],
        }


def parse_hunks(patch_text: str) -> list[Hunk]:
    """Split a unified diff (strip level 1) into hunks, using the line counts of each header."""
    hunks: list[Hunk] = []
    lines = patch_text.splitlines()
    current_file = ""
    number = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        name = diff_target(line)
        if name is not None:
            current_file = name
            number = 0
            i += 1
            continue
        m = _HUNK_RE.match(line)
        if not m:
            i += 1
            continue
        old_left = int(m.group(2)) if m.group(2) is not None else 1
        new_left = int(m.group(4)) if m.group(4) is not None else 1
        body = [line]
        i += 1
        while i < len(lines) and (old_left > 0 or new_left > 0):
            body_line = lines[i]
            tag = body_line[:1]
            if tag == "\\":  # "\ No newline at end of file"
                body.append(body_line)
                i += 1
                continue
            if tag in (" ", ""):
                old_left -= 1
                new_left -= 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            else:
                break
            body.append(body_line)
            i += 1
        number += 1
        hunks.append(Hunk(file=current_file, number=number, header=line, text="\n".join(body)))
    return hunks


def _patch_tool() -> str:
    tool = shutil.which("patch")
    if tool is None:
        raise EnvironmentProblem("GNU patch is not installed", fix="apt-get install patch")
    return tool


def _run_patch(patch_file: Path, workdir: Path, *, reverse: bool, dry_run: bool) -> tuple[bool, str]:
    argv = [_patch_tool(), "-p1", "--batch", "--fuzz=0", "--no-backup-if-mismatch", "-i", str(patch_file)]
    argv += ["--reverse"] if reverse else ["--forward"]
    if dry_run:
        argv.append("--dry-run")
    proc = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, check=False)
    return proc.returncode == 0, proc.stdout + proc.stderr


def _rejected(output: str, hunks: Sequence[Hunk]) -> list[Hunk]:
    """The hunks GNU patch reported as FAILED, matched back to the patch text."""
    found: list[Hunk] = []
    current = ""
    for line in output.splitlines():
        m = _CHECKING_RE.match(line.strip())
        if m:
            current = m.group(1).strip().strip("'\"")
            continue
        f = _FAILED_RE.search(line)
        if f:
            num = int(f.group(1))
            found += [h for h in hunks if h.file == current and h.number == num]
    return found


def check_patch(entry: PatchEntry, workdir: Path) -> CheckResult:
    """Check one patch against `workdir` (a scratch copy) and apply it there if it applies."""
    assert entry.patch_file is not None
    missing = [t for t in entry.target_files if not (workdir / t).is_file()]
    if missing:
        return CheckResult(entry.id, FAILS, f"target file missing in the source tree: {missing[0]}")
    ok, output = _run_patch(entry.patch_file, workdir, reverse=False, dry_run=True)
    if ok:
        _run_patch(entry.patch_file, workdir, reverse=False, dry_run=False)
        return CheckResult(entry.id, APPLIES, _offsets(output))
    rev_ok, _ = _run_patch(entry.patch_file, workdir, reverse=True, dry_run=True)
    if rev_ok:
        return CheckResult(entry.id, ALREADY_APPLIED, "the source already contains this change")
    hunks = parse_hunks(entry.patch_file.read_text(encoding="utf-8", errors="replace"))
    rejected = _rejected(output, hunks)
    if rejected:
        where = ", ".join(f"{h.file} hunk #{h.number} ({h.header})" for h in rejected)
        detail = f"rejected: {where}"
    else:
        lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
        detail = lines[-1] if lines else "patch failed"
    return CheckResult(entry.id, FAILS, detail, tuple(rejected))


def check_entries(entries: Sequence[PatchEntry], source: Path) -> list[CheckResult]:
    """Dry-run every entry against `source`, in order, without modifying `source`."""
    source = Path(source)
    if not source.is_dir():
        raise UsageError(f"source tree {source} is not a directory")
    results: list[CheckResult] = []
    with scratch_dir("condapipe-patch-check-") as tmp:
        work = Path(tmp)
        for entry in entries:
            for target in entry.target_files:
                src = source / target
                dst = work / target
                if src.is_file() and not dst.exists():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dst)
        for entry in entries:
            if entry.patch_file is None:
                results.append(CheckResult(entry.id, CONFIG, "configuration only: " + _env_text(entry)))
            else:
                results.append(check_patch(entry, work))
    return results


def _offsets(output: str) -> str:
    """'3 hunks moved by -165 lines' when upstream code moved (the patch still applies exactly)."""
    moved = [int(m.group(1)) for m in _OFFSET_RE.finditer(output)]
    if not moved:
        return ""
    amounts = ", ".join(f"{n:+d}" for n in sorted(set(moved)))
    return f"{len(moved)} hunk{'s' if len(moved) > 1 else ''} moved by {amounts} lines"


def _env_text(entry: PatchEntry) -> str:
    return " ".join(f"{k}={v}" for k, v in entry.env)

"""A dry run a person reads at a glance (issue 24, item 5): short lines per package and reason,
identical reasons folded with a count, inputs and hashes only with --debug or --json, and paths
never cut when the output goes to a pipe or a file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
SMOKE = ["build", "cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--engine", "rattler-build", "--dry-run"]
LABEL = "cuda-smoke-1.0.0-cuda13.0"
HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, env=env)


def _plan_lines(stdout: str) -> list[str]:
    """The plan block of a dry run (the resolve block with channels and sources comes before it)."""
    lines = stdout.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("plan: ")) :]


def test_a_fresh_dry_run_is_one_line_per_package_without_dicts_or_hashes(tmp_path: Path) -> None:
    proc = _run(SMOKE, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = "plan: 6 steps with rattler-build into channel (work dir .condapipe)"
    assert head in lines, proc.stdout + proc.stderr  # (failed once on a loaded machine: say what came)
    plan = lines.index(head)
    assert lines[plan:] == [  # the resolve block (channels, source) comes first
        "plan: 6 steps with rattler-build into channel (work dir .condapipe)",
        f"  run  {LABEL}: render, build, fix, verify, test, publish — not done before",
    ]
    assert not HEX64.search(proc.stdout + proc.stderr)
    assert "{'" not in proc.stdout


def test_debug_and_json_keep_every_input_and_hash(tmp_path: Path) -> None:
    debug = _run([*SMOKE, "--debug"], tmp_path)
    assert f"  render:{LABEL} (run: not done before)" in debug.stdout
    assert HEX64.search(debug.stdout)  # the code hash of render, fix and verify
    assert "'cuda_variants': [{" in debug.stdout  # the spec in full, not cut at 100 characters
    as_json = json.loads(_run([*SMOKE, "--json"], tmp_path).stdout)
    assert HEX64.fullmatch(as_json["steps"][0]["inputs"]["code"])


def test_steps_stopped_for_one_reason_are_folded_into_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    proc = _run([*SMOKE, "--output-dir", "a-file/channel"], tmp_path)
    assert proc.returncode == 3
    assert _plan_lines(proc.stdout)[1:] == [
        # an output dir under a file cannot be written, --force or not: no "--force builds anyway"
        f"  stop {LABEL}: render, build, fix, verify, test, publish — stopped by the blocking doctor "
        "finding above"
    ]


def test_several_packages_with_one_reason_fold_under_it_with_a_count(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    args = ["build", "pytorch", "--version", "2.5.1", "--python", "3.11", "--cuda", "12.4"]
    proc = _run([*args, "--engine", "rattler-build", "--dry-run", "--output-dir", "a-file/channel"], tmp_path)
    assert proc.returncode == 3
    assert _plan_lines(proc.stdout)[1:] == [
        "  stop (×12 steps) — stopped by the blocking doctor finding above:",
        "      magma-cuda124-2.6.1: render, build, fix, verify, test, publish",
        "      pytorch-2.5.1-py3.11-cuda12.4: render, build, fix, verify, test, publish",
    ]


def test_piped_output_never_cuts_a_path(tmp_path: Path) -> None:
    work = tmp_path / ("a-folder-name-long-enough-to-pass-any-terminal-width-" * 3) / "work"
    proc = _run(
        ["doctor", "cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--work-dir", str(work)], tmp_path
    )
    line = next(line for line in proc.stdout.splitlines() if "--work-dir" in line)
    assert f"--work-dir {work} is writable" in line
    assert "…" not in proc.stdout

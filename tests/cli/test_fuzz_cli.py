"""The CI slice of the CLI fuzz campaign (scripts/fuzz_cli.py runs the full one): 300 generated
invocations of every subcommand with hostile archives, config files, paths and flag values, each
in its own sandbox (issue 38 added hostile wheels, pre-scans, URL parts, environment files and
signals to running commands). None may print a traceback, hang, die by a signal, write outside its
sandbox, change an input package when it fails, leave scratch files, answer --json in plain text,
print a secret, or answer a signal with more than the one line "interrupted".

The campaign runs in a fresh interpreter: it forks one child per invocation, and a child forked
from this pytest process (where earlier tests started py-rattler's runtime threads) would hang
on the first resolve, which no user's condapipe process ever does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fuzz.campaign import CLASSES

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_cli.py"


def test_three_hundred_hostile_invocations_fail_cleanly(tmp_path: Path) -> None:
    argv = [sys.executable, str(SCRIPT), "--seed", "2024", "--count", "300", "--timeout", "60"]
    argv += ["--keep", str(tmp_path / "fuzz"), "--report", str(tmp_path / "report.json")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3000)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["invocations"] == 300, done.stderr[-2000:]
    assert report["failure_classes"] == dict.fromkeys(CLASSES, 0), report["failures"]
    # 130: interrupted; a 130 from a command no signal was sent to counts in the exit-code class
    assert set(report["exit_codes"]) <= {"0", "1", "2", "3", "130"}
    assert len(report["commands"]) >= 10  # every subcommand was exercised
    assert report["signals_sent"] > 0  # some commands were interrupted while running
    assert done.returncode == 0, done.stdout[-2000:]

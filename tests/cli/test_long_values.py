"""A 100,000-character value is not repeated whole in an error (issue 38, item 8).

Whatever refuses it (click's own checks, condapipe's rules, a missing path), the one line the user
sees keeps the value's head and says how long it was.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
LONG = "a" * 100_000


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "magma", "--cuda", LONG, "-o", "out"],
        ["render", "magma", "--arch", LONG, "-o", "out"],
        ["build", "magma", "--cuda", "12.4", "--engine", LONG, "--dry-run"],
        ["build", "magma", "--cuda", "12.4", "--variant", LONG, "--dry-run"],
        ["fix", "x.conda", "--zstd-level", LONG],
        ["verify", LONG],
        ["wheels", LONG, "--to", "c"],
        ["plan", "magma", "--emit", LONG, "--json"],
        ["patches", "list", "--for", LONG],
    ],
    ids=lambda argv: "-".join(a for a in argv[:3] if a != LONG),
)
def test_a_huge_value_is_cut_in_the_error_line(tmp_path: Path, argv: list[str]) -> None:
    done = subprocess.run([*CLI, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300)

    assert done.returncode in (2, 3), done.stderr[:500]  # 3: the OS refuses a 100,000-character path
    assert len(done.stdout) + len(done.stderr) < 2000
    assert "a" * 60 in done.stdout + done.stderr  # the head of the value is still there to recognise

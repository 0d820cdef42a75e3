"""The CI slice of the CLI fuzz campaign (scripts/fuzz_cli.py runs the full one): 300 generated
invocations of every subcommand with hostile archives, config files, paths and flag values, each
in its own sandbox. None may print a traceback, hang, die by a signal, write outside its sandbox,
change an input package when it fails, leave scratch files, or answer --json in plain text."""

from __future__ import annotations

from pathlib import Path

from fuzz.campaign import CLASSES, generate, run, summary


def test_three_hundred_hostile_invocations_fail_cleanly(tmp_path: Path) -> None:
    results = run(generate(seed=2024, count=300), tmp_path / "fuzz", timeout=60.0)
    report = summary(results)
    assert report["invocations"] == 300
    assert report["failure_classes"] == dict.fromkeys(CLASSES, 0), report["failures"]
    assert set(report["exit_codes"]) <= {"0", "1", "2", "3"}
    assert len(report["commands"]) >= 9  # every subcommand was exercised

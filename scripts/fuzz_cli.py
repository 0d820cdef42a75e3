#!/usr/bin/env python3
"""The full CLI fuzz campaign (issues 14, 25 and 38): ≥ 5,000 generated invocations of every subcommand.

Prints the invocations, the exit-code histogram and the count in each failure class (all must be
0), plus the first failures. The same seed gives the same invocations. The fast slice of the same
generator runs in CI (tests/cli/test_fuzz_cli.py). Issue 25 added generated workflows (every emitted
run line is run under bash with hostile values), canary secrets, output paths, --force journals, the
build-tool channel and source archives (tests/fuzz/round3.py) and the `secret` and `injection` classes.
Issue 38 added hostile wheels, --source pre-scans, secrets in URL queries and fragments, files and
numbers named by environment variables, and SIGINT/SIGTERM/SIGHUP sent to running commands and their
process groups (tests/fuzz/round4.py) and the `interrupt` class.

    python3 scripts/fuzz_cli.py [--count 5000] [--seed 25] [--workers 0] [--timeout 30] [--keep DIR]
                                [--report FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz.campaign import generate, run, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--workers", type=int, default=0, help="parallel invocations (0: all cores)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before an invocation is a hang")
    parser.add_argument("--keep", type=Path, help="sandbox root to keep (default: a temp dir, removed)")
    parser.add_argument("--report", type=Path, help="also write the summary as JSON to this file")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="condapipe-fuzz-"))
    start = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            print(f"  {done}/{total} ({time.monotonic() - start:.0f}s)", file=sys.stderr, flush=True)

    try:
        results = run(
            generate(args.seed, args.count),
            root,
            workers=args.workers,
            timeout=args.timeout,
            progress=progress,
        )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report = summary(results)
    if args.report:
        args.report.write_text(json.dumps(report, indent=1) + "\n")
    print(f"seed {args.seed}: {report['invocations']} invocations in {time.monotonic() - start:.0f}s")
    print(f"signals sent to running commands: {report['signals_sent']}")
    print(f"per command: {json.dumps(report['commands'])}")
    print(f"exit codes: {json.dumps(report['exit_codes'])}")
    print(f"failure classes: {json.dumps(report['failure_classes'])}")
    for failure in report["failures"][:20]:
        print(f"  FAIL {failure['classes']} {failure['label']}: {failure['argv']!r} -- {failure['detail']}")
    return 1 if any(report["failure_classes"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())

"""A package's tests in a process of its own: rattler-build's installer draws progress bars on the
terminal it finds (its progress callback does not stop them), over condapipe's live step table.
Here its stderr is a pipe (the bars stay off) that goes into the step's log, and only the result
comes back: one line, MARK then JSON.

Run as `python -m condapipe.plan.test_child tests PACKAGE CHANNELS_JSON`: the package's own tests
(Package.run_tests). A conda-build package's info/test scripts run in condapipe.plan.conda_build_tests,
which installs without a progress bar.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

MARK = "\x1econdapipe-tests:"


def run_in_child(mode: str, package: Path, channels: list[str], log: Any) -> dict[str, Any]:
    """The child's result ({"outcomes": [...]} or {"error": text}); its output goes to `log`."""
    argv = [sys.executable, "-m", "condapipe.plan.test_child", mode, str(package), json.dumps(channels)]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    result: dict[str, Any] | None = None
    for line in proc.stdout.split("\n"):  # not splitlines(): it splits at MARK's \x1e too
        if line.startswith(MARK):
            result = json.loads(line[len(MARK) :])
        elif line.strip():
            log.write(line)
    if proc.stderr.strip():
        log.write(proc.stderr.rstrip())
    if result is None:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return {"error": f"the test process ended without a result: {tail[0]}"}
    return result


def _run(mode: str, package: str, channels: list[str]) -> dict[str, Any]:
    import rattler_build

    if mode != "tests":
        return {"error": f"unknown test mode {mode!r}"}
    try:
        outcomes = rattler_build.Package.from_file(package).run_tests(channel=channels)
        return {
            "outcomes": [
                {"index": o.test_index, "success": bool(o.success), "output": list(o.output)}
                for o in outcomes
            ]
        }
    except rattler_build.RattlerBuildError as exc:
        return {"error": str(exc)}


def main() -> int:
    mode, package, channels = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    result = _run(mode, package, channels)
    sys.stdout.write(MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

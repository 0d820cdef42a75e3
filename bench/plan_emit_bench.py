"""Time from `condapipe plan … --emit github-actions -o FILE` to a workflow actionlint accepts.

Prints the wall time of each part for a 6-variant pytorch matrix (2 magma + 4 pytorch jobs) and for
cuda-smoke. Run: python3 bench/plan_emit_bench.py (needs actionlint on PATH: pip install -e '.[test]').
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
SPECS = {
    "pytorch 2 CUDAs x 2 Pythons": [
        "pytorch",
        "--version",
        "2.4.1",
        "--cuda",
        "12.1",
        "--cuda",
        "12.4",
        "--python",
        "3.10",
        "--python",
        "3.12",
    ],
    "cuda-smoke": ["cuda-smoke", "--cuda", "13.0", "--arch", "8.0;9.0"],
}


def main() -> None:
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        sys.exit("actionlint not on PATH: pip install -e '.[test]'")
    for name, spec in SPECS.items():
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "wf.yml"
            t0 = time.perf_counter()
            subprocess.run(
                [*CLI, "plan", *spec, "--emit", "github-actions", "-o", str(out)],
                cwd=tmp,
                check=True,
                capture_output=True,
            )
            t1 = time.perf_counter()
            lint = subprocess.run([actionlint, str(out)], capture_output=True, text=True)
            t2 = time.perf_counter()
            status = "valid" if lint.returncode == 0 and not lint.stdout else f"INVALID: {lint.stdout[:200]}"
            print(
                f"{name}: plan --emit {t1 - t0:.2f} s, actionlint {t2 - t1:.2f} s, "
                f"total {t2 - t0:.2f} s ({status})"
            )


if __name__ == "__main__":
    main()

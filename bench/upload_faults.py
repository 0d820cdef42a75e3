"""Upload under injected faults: 200 packages in one run, then 5 kill -9 / rerun cycles.

The real `condapipe upload` process talks to the fake anaconda.org (tests/fake_anaconda) through
the fault-injecting proxy: 30 % of requests (start-up checks included) get a 503, a reset before
or in the middle of the body, an answer lost after the server acted, or a stall past the
client's timeout ($CONDAPIPE_UPLOAD_TIMEOUT). The run must exit 0 with `--retries 10`, every
file on the server once with the right sha256; then 4 runs to a second owner are killed at
seeded random moments and one `--force` of rebuilt packages is killed right after the server
executed a DELETE; the reruns must leave exactly the right files.

    python3 bench/upload_faults.py [--packages 200] [--kill-cycles 5] [--seed 14] [--probability 0.3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fake_anaconda.campaign import run_campaign


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=200)
    parser.add_argument("--kill-cycles", type=int, default=5)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--probability", type=float, default=0.3)
    parser.add_argument("--timeout", type=float, default=0.3, help="client timeout (s); stalls last 3x")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="upload-faults-") as tmp:
        r = run_campaign(
            Path(tmp),
            packages=args.packages,
            kill_cycles=args.kill_cycles,
            probability=args.probability,
            seed=args.seed,
            timeout=args.timeout,
            log=lambda msg: print(f"  .. {msg}", flush=True),
        )
    print(f"packages:            {r.packages}")
    print(f"fault probability:   {args.probability:.0%} (seed {args.seed}), client timeout {args.timeout}s")
    print(f"requests via proxy:  {r.requests}")
    print(
        f"faults injected:     {sum(r.faults.values())}  "
        + ", ".join(f"{k} {v}" for k, v in sorted(r.faults.items()))
    )
    startup = {k: v for k, v in r.faults_by_step.items() if k.endswith(("@root", "@user"))}
    print(
        f"  on start-up calls: {sum(startup.values())}  "
        + ", ".join(f"{k} {v}" for k, v in sorted(startup.items()))
    )
    for step in ("s3", "commit", "dist", "stage"):
        hits = {k.split("@")[0]: v for k, v in r.faults_by_step.items() if k.endswith("@" + step)}
        print(
            f"  on {step + ':':<15} {sum(hits.values())}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(hits.items()))
        )
    print(
        f"one run:             exit {r.run_exit}, {r.run_seconds:.1f} s, statuses {r.statuses}, "
        f"retries {r.retries}"
    )
    for line in r.kills:
        print(f"kill cycle:          {line}")
    print(f"final reruns:        exits {r.final_exits}")
    print(f"server state check:  {'OK: every file exactly once, right sha256' if r.ok else 'FAILED'}")
    for problem in r.problems:
        print(f"  problem: {problem}")
    print(f"wall time:           {r.wall_seconds:.1f} s")
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())

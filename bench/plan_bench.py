#!/usr/bin/env python3
"""Benchmark: how long a plan takes to decide that nothing needs to run, and what recording costs.

A full PyTorch matrix is ~15 variants x 6 steps, with multi-GB packages as outputs. A rerun must
notice in well under a second that everything is finished, so outputs are checked by size and
mtime (a stat), not re-hashed. This prints, for a synthetic plan of JOBS x 6 steps whose build
outputs are MB-sized files:
  first run         all steps run (writing outputs, hashing them once, one atomic state write each)
  unchanged rerun   every step decided "unchanged" (what `condapipe build` does on a rerun)
  re-hash           what the rerun would cost if it re-hashed every output instead
  dry-run describe  the --dry-run table
and the state file's size. Not a test: it prints numbers.

    python bench/plan_bench.py                 # 15 jobs, 64 MB build outputs
    python bench/plan_bench.py --jobs 40 --mb 8
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from condapipe.hashing import hash_file
from condapipe.plan.runner import Plan, Step, StepContext, StepOutcome, describe, run_plan
from condapipe.plan.state import STATE_FILE, StateFile

KINDS = ("render", "build", "fix", "verify", "test", "publish")


def _writer(size: int):
    def act(ctx: StepContext) -> StepOutcome:
        out = ctx.step_dir / "out.bin"
        with out.open("wb") as fh:
            fh.write(os.urandom(min(size, 1 << 20)) * max(1, size >> 20))
        return StepOutcome(files=(out,), data={"size": size})

    return act


def make_plan(base: Path, jobs: int, mb: int) -> Plan:
    steps: list[Step] = []
    for j in range(jobs):
        prev: tuple[str, ...] = ()
        for kind in KINDS:
            size = (mb << 20) if kind in ("build", "fix") else 4096
            sid = f"{kind}:job{j}"
            steps.append(Step(sid, kind, kind, {"job": j, "flags": "-O2"}, _writer(size), needs=prev))
            prev = (sid,)
    return Plan(tuple(steps), base / "work", base / "channel")


def timed(label: str, fn) -> float:
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    print(f"{label:<18} {took * 1000:10.1f} ms")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=15)
    parser.add_argument("--mb", type=int, default=64, help="size of each build/fix output")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        base = Path(tmp)
        plan = make_plan(base, args.jobs, args.mb)
        print(f"{len(plan.steps)} steps, {2 * args.jobs} outputs of {args.mb} MB")
        timed("first run", lambda: run_plan(plan))
        timed("unchanged rerun", lambda: run_plan(make_plan(base, args.jobs, args.mb)))
        records = StateFile(base / "work" / STATE_FILE).steps().values()
        timed("re-hash outputs", lambda: [hash_file(f.path).sha256 for r in records for f in r.outputs])
        timed("dry-run describe", lambda: describe(make_plan(base, args.jobs, args.mb)))
        print(f"state file         {(base / 'work' / STATE_FILE).stat().st_size / 1024:10.1f} KiB")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measure the memory one compile job of a real build takes: the figure MAX_JOBS is derived from.

Samples /proc while a build runs (started beside it, stopped with SIGTERM/SIGINT or when --pid
exits) and records every compiler process's peak resident set (VmHWM, read while it lives). Prints,
per program (cc1plus, cc1, nvcc's cicc and ptxas, the linkers), how many processes ran and their
peak RSS at the median, p90, p99 and max, and the most compiler memory and processes alive at once.
That is what recipes/<family>/family.yaml's `compile_job_gib` is set from.

usage: compile_job_memory.py [--interval S] [--pid PID] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

PROGRAMS = (
    "cc1plus",
    "cc1",
    "as",
    "ld",
    "ld.gold",
    "ld.lld",
    "collect2",
    "cicc",
    "ptxas",
    "nvcc",
    "fatbinary",
)


def _status(pid: str) -> tuple[str, int, int] | None:
    """(program, VmRSS KiB, VmHWM KiB) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    name = fields.get("Name", "")
    if name not in PROGRAMS:
        return None
    try:
        return name, int(fields.get("VmRSS", "0 kB").split()[0]), int(fields.get("VmHWM", "0 kB").split()[0])
    except ValueError:
        return None


def _quantile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--pid", type=int, help="stop when this process ends")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON (temp name, then rename)")
    args = parser.parse_args()

    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    peaks: dict[tuple[str, str], int] = {}  # (pid, start marker) -> peak KiB
    names: dict[tuple[str, str], str] = {}
    most_kib = most_jobs = 0
    started = time.monotonic()
    while not stop:
        if args.pid and not Path(f"/proc/{args.pid}").exists():
            break
        total = jobs = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            seen = _status(pid)
            if seen is None:
                continue
            name, rss, hwm = seen
            key = (pid, name)
            peaks[key] = max(peaks.get(key, 0), hwm, rss)
            names[key] = name
            total += rss
            jobs += name in ("cc1plus", "cc1", "cicc", "ptxas")
        most_kib, most_jobs = max(most_kib, total), max(most_jobs, jobs)
        time.sleep(args.interval)

    by_program: dict[str, list[int]] = {}
    for key, kib in peaks.items():
        by_program.setdefault(names[key], []).append(kib)
    mib = 1024
    figures = {
        "seconds": round(time.monotonic() - started, 1),
        "cores": os.cpu_count(),
        "most_compiler_mib_at_once": round(most_kib / mib),
        "most_compile_jobs_at_once": most_jobs,
        "programs": {
            name: {
                "processes": len(values),
                "peak_mib_median": round(_quantile(values, 0.5) / mib),
                "peak_mib_p90": round(_quantile(values, 0.9) / mib),
                "peak_mib_p99": round(_quantile(values, 0.99) / mib),
                "peak_mib_max": round(max(values) / mib),
            }
            for name, values in sorted(by_program.items())
        },
    }
    print(json.dumps(figures, indent=1))
    if args.out:
        tmp = args.out.with_name(f".{args.out.name}.tmp")
        tmp.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
        tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The resume figure on a GPU machine: real magma built cold, then stopped at half and rerun.

Issue 34 item 3: a build stopped midway continues on the rerun from the compile cache condapipe
keeps under the work dir by default for magma (ccache on PATH, no --compile-cache given).

1. cold: `condapipe build magma --cuda C --arch A --source TREE --build-tools wheels --offline
   --no-test` in a fresh work dir (its default cache starts empty);
2. interrupt: the work dir removed, the same command started again and sent SIGINT (as Ctrl-C would)
   once ninja's [n/N] in the build log reaches --stop-at of N (default 0.5);
3. rerun: the same command in the same work dir.

Prints the table: the cold build step (libmagma.a's `cmake --build`, from build.sh's own line),
where it was interrupted, the rerun's build step, rerun / cold (target <= 55 %), the rerun's cache
hits and misses. Results: OUT/magma_resume.md/.json and the logs. Phases can run one per command
(--phase cold|interrupt|rerun, state kept under --work) where a command has a time limit.
--rerun-stop-at F stops the rerun once ninja passes F of N and reports its cache counts so far (a
rehearsal on a small machine, where a whole magma build takes 40 minutes).

usage: magma_resume.py --source TREE --work DIR --out DIR [--cuda 13.0] [--arch 9.0]
       [--phase all|cold|interrupt|rerun] [--stop-at 0.5] [--rerun-stop-at F]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

CONDAPIPE = shutil.which("condapipe") or "condapipe"
NINJA = re.compile(r"\[(\d+)/(\d+)\]")
BUILT = re.compile(r"condapipe: libmagma\.a built in (\d+) s with (\d+) jobs")
STATS = re.compile(r"^\S*\s*(direct_cache_hit|preprocessed_cache_hit|cache_miss)\s+(\d+)", re.M)


def argv(args: argparse.Namespace, wd: Path, channel: Path) -> list[str]:
    return [CONDAPIPE, "build", "magma", "--cuda", args.cuda, "--arch", args.arch,
            "--source", str(args.source), "--build-tools", "wheels", "--offline",
            "--output-dir", str(channel), "--work-dir", str(wd), "--no-test"]  # fmt: skip


def env() -> dict[str, str]:
    """The default cache is what is measured: no cache named by the caller."""
    out = {k: v for k, v in os.environ.items() if k != "CONDAPIPE_COMPILE_CACHE"}
    out["CONDAPIPE_PROGRESS_EVERY"] = "30"
    return out


def engine_log(wd: Path, after: float = 0.0) -> Path | None:
    logs = [p for p in (wd / "logs").glob("magma-cuda*-rattler-build-*.log") if p.stat().st_mtime >= after]
    return max(logs, key=lambda p: p.stat().st_mtime) if logs else None


def progress(text: str) -> tuple[int, int]:
    found = NINJA.findall(text)
    return (int(found[-1][0]), int(found[-1][1])) if found else (0, 0)


def cache_dir(wd: Path) -> Path | None:
    """The variant's ccache folder under the work dir's kept cache."""
    found = [p for p in (wd / "compile-cache").glob("*") if p.is_dir()]
    return found[0] if len(found) == 1 else None


def ccache_counts(directory: Path | None) -> dict[str, int]:
    """ccache's counters of a cache dir now (build.sh zeroes them when a build starts)."""
    if directory is None or shutil.which("ccache") is None:
        return {}
    proc = subprocess.run(
        ["ccache", "--print-stats"],
        env={**os.environ, "CCACHE_DIR": str(directory)},
        capture_output=True,
        text=True,
        check=False,
    )
    return {k: int(v) for k, v in STATS.findall(proc.stdout)}


def run_phase(
    args: argparse.Namespace, tag: str, wd: Path, *, fresh: bool, stop_at: float | None
) -> dict[str, object]:
    """One `condapipe build magma`; stopped with SIGINT once ninja passes `stop_at` of its steps."""
    # One channel per work dir: the output dir is an input of the build step, so the rerun must name
    # the same one as the stopped build (another would be "changed inputs", and rightly so).
    channel = args.work / f"channel-{wd.name}"
    if fresh:
        shutil.rmtree(wd, ignore_errors=True)
        shutil.rmtree(channel, ignore_errors=True)
    command = argv(args, wd, channel)
    started = time.time()
    t0 = time.perf_counter()
    with (args.out / f"condapipe-{tag}.txt").open("w") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env(), start_new_session=True
        )
        stopped_at: tuple[int, int] | None = None
        stopped_after = None
        mid: dict[str, int] = {}
        while proc.poll() is None:
            time.sleep(1)
            if stop_at is None:
                continue
            log = engine_log(wd, started)
            done, total = progress(log.read_text(errors="replace")) if log else (0, 0)
            if total and done >= stop_at * total:
                stopped_at, stopped_after = (done, total), time.perf_counter() - t0
                mid = ccache_counts(cache_dir(wd))  # before the stop: the rerun's own counts so far
                proc.send_signal(signal.SIGINT)  # to condapipe, as Ctrl-C would
                proc.wait(timeout=300)
                break
    wall = time.perf_counter() - t0
    log = engine_log(wd, started)
    text = log.read_text(errors="replace") if log else ""
    (args.out / f"rattler-build-{tag}.log").write_text(text[-400_000:])
    shown = (args.out / f"condapipe-{tag}.txt").read_text(errors="replace")
    row: dict[str, object] = {"exit": proc.returncode, "plan_s": round(wall, 1)}
    reason = re.search(r"▶ build:\S+: .*", shown)
    row["build_reason"] = reason.group(0) if reason else ""
    built = BUILT.findall(text)
    if built:
        row["compile_s"], row["jobs"] = int(built[-1][0]), int(built[-1][1])
    row["ninja_total"] = progress(text)[1]
    if stopped_at is not None:
        row["stopped_at"] = f"{stopped_at[0]}/{stopped_at[1]}"
        row["stopped_after_s"] = round(stopped_after or 0.0, 1)
        row["cache_while_running"] = mid
    stats = {k: int(v) for k, v in STATS.findall(text)}
    row["cache_stats"] = stats or ccache_counts(cache_dir(wd))
    row["stored_objects"] = ccache_counts(cache_dir(wd)).get("cache_miss")
    return row


def table(result: dict[str, dict[str, object]], args: argparse.Namespace) -> str:
    cold, stop, rerun = (result.get(k, {}) for k in ("cold", "interrupt", "rerun"))
    lines = [
        f"# magma {args.cuda} arch {args.arch}: stopped at half, rerun ({os.cpu_count()} cores)",
        "",
        "| build | exit | build step (cmake --build) | interrupted at | whole plan | cache hits | misses |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for tag, row in (("cold", cold), ("interrupted (fresh work dir)", stop), ("rerun", rerun)):
        if not row:
            continue
        stats = row.get("cache_stats") or {}
        assert isinstance(stats, dict)
        hits = stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0)
        at = f"[{row['stopped_at']}] after {row['stopped_after_s']} s" if "stopped_at" in row else ""
        compile_s = f"{row['compile_s']} s" if "compile_s" in row else "-"
        misses = stats.get("cache_miss", "?")
        cells = [tag, row["exit"], compile_s, at, f"{row['plan_s']} s", hits, misses]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if (
        isinstance(cold.get("compile_s"), int)
        and isinstance(rerun.get("compile_s"), int)
        and cold["compile_s"]
    ):
        share = 100 * rerun["compile_s"] / cold["compile_s"]
        verdict = "meets" if share <= 55 else "MISSES"
        lines.append(f"\nrerun build step = {share:.1f} % of the cold one ({verdict} the target <= 55 %)")
    if stop.get("stored_objects") is not None:
        lines.append(
            f"objects the interrupted build finished (stored in the cache): {stop['stored_objects']}"
        )
    if rerun.get("build_reason"):
        lines.append(f"rerun said: {rerun['build_reason']}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--cuda", default="13.0")
    ap.add_argument("--arch", default="9.0")
    ap.add_argument("--phase", choices=("all", "cold", "interrupt", "rerun"), default="all")
    ap.add_argument("--stop-at", type=float, default=0.5)
    ap.add_argument("--rerun-stop-at", type=float, default=None)
    args = ap.parse_args()
    if shutil.which("ccache") is None:
        raise SystemExit(
            "needs ccache on PATH (carry Debian's ccache in tools/): the default cache is ccache"
        )
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    state = args.work / "magma_resume.json"
    result: dict[str, dict[str, object]] = json.loads(state.read_text()) if state.exists() else {}
    phases = ("cold", "interrupt", "rerun") if args.phase == "all" else (args.phase,)
    for phase in phases:
        if phase == "cold":
            row = run_phase(args, "cold", args.work / "wd-cold", fresh=True, stop_at=None)
        elif phase == "interrupt":
            row = run_phase(args, "interrupt", args.work / "wd", fresh=True, stop_at=args.stop_at)
        else:
            row = run_phase(args, "rerun", args.work / "wd", fresh=False, stop_at=args.rerun_stop_at)
        result[phase] = row
        state.write_text(json.dumps(result, indent=2))
        print(f"{phase}: {json.dumps(row)}", flush=True)
    text = table(result, args)
    (args.out / "magma_resume.json").write_text(json.dumps(result, indent=2))
    (args.out / "magma_resume.md").write_text(text)
    print(text)
    return 0 if all(r.get("exit") in (0, 130) for r in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

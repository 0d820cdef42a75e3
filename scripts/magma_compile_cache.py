#!/usr/bin/env python3
"""The compile-cache figure on a GPU machine: real magma built cold, then warm, through condapipe.

1. `condapipe build magma --compile-cache CACHE --build-number 0` (rattler-build, offline,
   cmake/ninja from the wheel tool channel) into an empty cache;
2. the work dir removed and made again at the same path, then the same build with
   `--build-number 1` (a change that must not invalidate any object);
3. the table: libmagma.a's compile (`cmake --build`, from the build log) cold and warm, the warm
   one as a share of the cold one (target <= 15 %), the whole plan both times, and the cache's
   own statistics for the warm build next to the objects in libmagma.a (target: every one a hit,
   1,333 of 1,333 for magma 2.6.1: 931 C/C++ objects through the launcher, 402 kernels through
   FindCUDA's nvcc custom commands).

--cache ccache: a cache directory under --work (ccache on PATH). --cache sccache: a Redis server
on 127.0.0.1 started here (redis-server on PATH, e.g. unpacked from carried Debian packages) as
the shared store. Results: OUT/magma_compile_cache.md/.json and the build logs.

usage: magma_compile_cache.py --source TREE --work DIR --out DIR [--cache ccache|sccache]
       [--cuda 13.0] [--arch 9.0]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONDAPIPE = shutil.which("condapipe") or "condapipe"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """redis-server on 127.0.0.1 (no persistence); libraries unpacked next to it are found."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit(
            "--cache sccache needs redis-server on PATH (carry Debian's redis-server, redis-tools)"
        )
    env = dict(os.environ)
    libdir = Path(exe).resolve().parent.parent / "lib" / f"{os.uname().machine}-linux-gnu"
    if libdir.is_dir():
        env["LD_LIBRARY_PATH"] = str(libdir)
    port = _free_port()
    data = work / "redis"
    data.mkdir(parents=True, exist_ok=True)
    argv = [
        exe,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data),
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("redis-server did not start")


def build(args: argparse.Namespace, cache: str, build_number: int, out: Path, tag: str) -> dict[str, object]:
    """One `condapipe build magma` in a fresh work dir at the same path; its figures."""
    work = args.work.resolve()
    wd, channel = work / "wd", work / f"channel-{tag}"
    shutil.rmtree(wd, ignore_errors=True)
    shutil.rmtree(channel, ignore_errors=True)
    argv = [CONDAPIPE, "build", "magma", "--cuda", args.cuda, "--arch", args.arch,
            "--source", str(args.source), "--build-tools", "wheels", "--offline",
            "--output-dir", str(channel), "--work-dir", str(wd),
            "--compile-cache", cache, "--build-number", str(build_number), "--no-test", "--json"]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    (out / f"build-{tag}.txt").write_text(
        f"$ {' '.join(argv)}\n{proc.stdout}\n{proc.stderr}\n(exit {proc.returncode})\n"
    )
    logs = sorted((wd / "logs").glob("magma-cuda*-rattler-build-*.log"))
    log = logs[-1].read_text(errors="replace") if logs else ""
    (out / f"rattler-build-{tag}.log").write_text(log[-400_000:])
    row: dict[str, object] = {"exit": proc.returncode, "plan_s": round(wall, 1)}
    compiled = re.findall(r"condapipe: libmagma\.a built in (\d+) s with (\d+) jobs", log)
    if compiled:
        row["compile_s"], row["jobs"] = int(compiled[-1][0]), int(compiled[-1][1])
    row["stats"] = cache_stats(log, args.cache)
    packages = sorted((channel / "linux-64").glob("magma-cuda*.conda"))
    if packages:
        row["objects"] = objects_in_package(packages[0])
    return row


def cache_stats(log: str, tool: str) -> dict[str, object]:
    """The cache's own statistics for this build, as build.sh printed them; objects hit/missed."""
    if tool == "sccache":
        found = re.findall(r"condapipe: sccache stats: (\{.*\})", log)
        if not found:
            return {}
        stats = json.loads(found[-1])["stats"]
        hits, misses = stats["cache_hits"]["counts"], stats["cache_misses"]["counts"]
        # one object per C/C++ or CUDA compile; CUDA's device passes (PTX, CUBIN, ...) are inside it
        return {
            "hits": hits.get("C/C++", 0) + hits.get("CUDA", 0),
            "misses": misses.get("C/C++", 0) + misses.get("CUDA", 0),
            "cuda_hits": hits.get("CUDA", 0),
            "not_cached": stats.get("not_cached"),
            "raw_hits": hits,
            "raw_misses": misses,
        }
    counts = {
        k: int(v)
        for k, v in re.findall(r"^(direct_cache_hit|preprocessed_cache_hit|cache_miss)\s+(\d+)", log, re.M)
    }
    if not counts:
        return {}
    return {
        "hits": counts.get("direct_cache_hit", 0) + counts.get("preprocessed_cache_hit", 0),
        "misses": counts.get("cache_miss", 0),
        "raw": counts,
    }


def objects_in_package(package: Path) -> int:
    """Members of lib/libmagma.a in the built package."""
    from condapipe.package.io import unpack

    with tempfile.TemporaryDirectory() as tmp:
        root = unpack(package, Path(tmp) / "pkg")
        listed = subprocess.run(
            ["ar", "t", str(root / "lib" / "libmagma.a")], capture_output=True, text=True, check=True
        )
        return len(listed.stdout.split())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--cache", choices=("ccache", "sccache"), default="ccache")
    ap.add_argument("--cuda", default="13.0")
    ap.add_argument("--arch", default="9.0")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    redis = None
    if args.cache == "sccache":
        redis, cache = start_redis(args.work)
    else:
        if shutil.which("ccache") is None:
            raise SystemExit("--cache ccache needs ccache on PATH (carry Debian's ccache in tools/)")
        cache_dir = args.work.resolve() / "ccache"
        shutil.rmtree(cache_dir, ignore_errors=True)
        cache = str(cache_dir)
    try:
        cold = build(args, cache, 0, args.out, "cold")
        print(f"cold: {json.dumps(cold)}", flush=True)
        warm = build(args, cache, 1, args.out, "warm")
        print(f"warm: {json.dumps(warm)}", flush=True)
    finally:
        if redis is not None:
            redis.terminate()
            redis.wait(timeout=10)
    result = {"cache": args.cache, "cores": os.cpu_count(), "cold": cold, "warm": warm}
    (args.out / "magma_compile_cache.json").write_text(json.dumps(result, indent=2))
    lines = [
        f"# magma compile cache ({args.cache}), CUDA {args.cuda}, arch {args.arch}, {os.cpu_count()} cores",
        "",
        "| build | exit | libmagma.a compile | whole plan | cache hits | misses | objects in libmagma.a |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for tag, row in (("cold (build 0)", cold), ("warm (build 1, fresh work dir)", warm)):
        stats = row.get("stats") or {}
        assert isinstance(stats, dict)
        lines.append(
            f"| {tag} | {row['exit']} | {row.get('compile_s', '?')} s | {row['plan_s']} s | "
            f"{stats.get('hits', '?')} | {stats.get('misses', '?')} | {row.get('objects', '?')} |"
        )
    if (
        isinstance(cold.get("compile_s"), int)
        and isinstance(warm.get("compile_s"), int)
        and cold["compile_s"]
    ):
        share = warm["compile_s"] / cold["compile_s"]
        lines.append(f"\nwarm compile = {100 * share:.1f} % of cold (target <= 15 %)")
    wstats = warm.get("stats") or {}
    assert isinstance(wstats, dict)
    lines.append(
        f"warm: {wstats.get('hits', '?')} of {warm.get('objects', '?')} objects hit in the cache's statistics"
    )
    text = "\n".join(lines) + "\n"
    (args.out / "magma_compile_cache.md").write_text(text)
    print(text)
    ok = cold["exit"] == 0 and warm["exit"] == 0 and wstats.get("misses") == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

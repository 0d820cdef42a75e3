#!/usr/bin/env python3
"""Benchmark: the whole post-build path of `condapipe build RECIPE_DIR` next to one zstd pass.

A recipe whose script copies a generated PyTorch-shaped tree (bench/fix_bench.py's generator:
two big ELF files with fatbin-like payloads, 300 small ELF files, 300 Python files) into the
prefix is built through the real CLI — engine -> fix -> verify -> test -> publish — with the
rattler-build engine, and with conda-build when a real `conda build` is installed. Printed per
step: wall time, peak RSS sampled from /proc every 0.2 s (the condapipe process and its children
together, then the condapipe process alone and its children alone: the engine's process, the build
script, the interrupt watcher), and output size; the build step is split at the end of the
recipe's script, so "engine packaging" is what the engine did after the copy (its relinking,
prefix scan and packing — since issue 35 at the final level on every core the memory bound
allows, the package's one compression).

Next to it, in the same run and over the same bytes: the floor, one `tar | zstd -T0 -LEVEL`
pass; optionally (flow `engine-final`) rattler-build alone through condapipe's engine adapter.
Flow `rattler-build-stage`: the same build with `--pack-from-stage` (issue 35's prototype: the engine
packs its metadata only, condapipe the payload in one streaming pass, timed from the build log).
Targets (issue 35): engine packaging + fix + verify + publish <= 1.15x the floor, the published
package within +1 % of the floor's bytes, each step's peak memory printed.

    python bench/postbuild_bench.py --size 200 --level 19 --flows floor,rattler-build   # rehearsal
    python bench/postbuild_bench.py --sizes 3400 --level 19 --flows floor,rattler-build --json out.json
    PYTHONPATH=/tmp/before/pipeline python bench/postbuild_bench.py --size 200   # another checkout
On the GPU machine: scripts/postbuild_bench_device.sh (one command, see its header).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SMALL_FILES = 300
# Two big ELF files in the proportions of fix_bench's 3.41 GB default (2048 + 1100 MiB).
BIG_SHARE = (0.65, 0.35)

# The script ends as a family's build.sh does (condapipe.render.recipe_dir.staged_fix_lines):
# condapipe's fix on the staged prefix, the engine's relocation off while it runs. A checkout
# from before the staged fix sets no CONDAPIPE_STAGED_FIX: its engine relocates, its fix step
# rewrites after packing, as it did.
STAGED_FIX = (
    'if [ -n "${{CONDAPIPE_STAGED_FIX:-}}" ]; then "$CONDAPIPE_STAGED_FIX" --prefix "$PREFIX" '
    '--build-prefix "$BUILD_PREFIX"; fi'
)
RECIPE_V1 = """\
package:
  name: torchshape
  version: 1.0.0
build:
  number: 0
  script:
    env:
      CONDAPIPE_STAGED_FIX: ${{{{ env.get("CONDAPIPE_STAGED_FIX", default="") }}}}
    content:
      - date +%s.%N > {marks}/script_start
      - cp -a {src}/lib $PREFIX/
      - date +%s.%N > {marks}/script_end
      - '{staged_fix}'
  dynamic_linking:
    binary_relocation: ${{{{ env.get("CONDAPIPE_STAGED_FIX", default="") == "" }}}}
{prefix_v1}"""
META_V0 = """\
package:
  name: torchshape
  version: 1.0.0
build:
  number: 0
  binary_relocation: false  # [environ.get("CONDAPIPE_STAGED_FIX", "") != ""]
  script_env:
    - CONDAPIPE_STAGED_FIX
{prefix_v0}"""
BUILD_SH = """\
#!/bin/bash
set -euo pipefail
date +%s.%N > {marks}/script_start
cp -a {src}/lib "$PREFIX/"
date +%s.%N > {marks}/script_end
{staged_fix}
"""


# -- measuring -----------------------------------------------------------------------------


def _status_kib(pid: int, field: str) -> int:
    """One `Vm...:` field of /proc/PID/status (KiB); 0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _rss_kib(pid: int) -> tuple[int, int]:
    """RSS (KiB) of `pid` itself and of all its descendants together, from /proc: the condapipe
    process and the processes it started (the engine's child, its build script, the interrupt
    watcher) are reported apart, since issue 27 bounds each process, not their sum."""
    own, below, todo, seen = _status_kib(pid, "VmRSS"), 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        if p != pid:
            below += _status_kib(p, "VmRSS")
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return own, below


Sample = tuple[float, int, int]  # (time, RSS KiB of the process itself, RSS KiB of its descendants)


def run_sampled(argv: list[str], **kw: object) -> tuple[float, int, list[Sample], str]:
    """Run `argv`; (wall s, peak RSS MiB from wait4, samples every 0.2 s, stdout). The last sample's
    own field is the process's VmHWM (its exact peak RSS), read just before it exits."""
    samples: list[Sample] = []
    hwm = [0]
    out = tempfile.TemporaryFile()  # noqa: SIM115 - read back after the child exits
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=out, **kw)  # type: ignore[call-overload]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            own, below = _rss_kib(proc.pid)
            samples.append((time.time(), own, below))
            hwm[0] = max(hwm[0], _status_kib(proc.pid, "VmHWM"))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    samples.append((float("nan"), hwm[0], 0))  # no time: matches no step, read by own_hwm_mib
    out.seek(0)
    text = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[:3]} failed ({os.waitstatus_to_exitcode(status)}):\n{text[-3000:]}")
    return wall, usage.ru_maxrss // 1024, samples, text


def _peak_mib(samples: list[Sample], start: float, end: float, which: str = "tree") -> int:
    """Peak RSS (MiB) between `start` and `end`: of the process and its descendants together
    ("tree"), of the process itself ("own"), or of its descendants together ("children")."""
    pick = {"tree": lambda o, b: o + b, "own": lambda o, b: o, "children": lambda o, b: b}[which]
    inside = [pick(o, b) for t, o, b in samples if start - 0.1 <= t <= end + 0.1]
    return max(inside, default=0) // 1024


def own_hwm_mib(samples: list[Sample]) -> int:
    """The process's own peak RSS over its whole run (VmHWM, exact rather than sampled)."""
    return samples[-1][1] // 1024 if samples else 0


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


# -- flows ---------------------------------------------------------------------------------


def generate(src: Path, total_mb: int) -> None:
    """fix_bench's PyTorch-shaped tree of about `total_mb` MB: 300 small ELF files (~100 MB
    together) and two big ones splitting the rest 65/35 (3400 gives fix_bench's 2048 + 1100 MiB)."""
    big_mib = max(2, int((total_mb - 100) * 1e6 / (1 << 20)))
    big = [max(1, int(big_mib * share)) for share in BIG_SHARE]
    subprocess.run(
        [
            *(sys.executable, str(HERE / "fix_bench.py"), "--run-flow", "gen", "--root", str(src)),
            *("--large-mb", ",".join(map(str, big)), "--small", str(SMALL_FILES)),
        ],
        check=True,
    )


_PY_ZSTD = (
    "import sys, zstandard; zstandard.ZstdCompressor(level=int(sys.argv[1]), threads=-1)"
    ".copy_stream(sys.stdin.buffer, sys.stdout.buffer, read_size=1 << 20, write_size=1 << 20)"
)


def floor(src: Path, out: Path, level: int) -> dict[str, object]:
    """One `tar | zstd -T0 -LEVEL` pass over the recipe's bytes (the lib/ folder it installs).

    Without the zstd command-line tool (the GPU machine), the same libzstd through the zstandard
    wheel with one worker per core (`threads=-1` is zstd -T0's multi-threaded compressor)."""
    zstd = shutil.which("zstd")
    if zstd is not None:
        ultra = "--ultra " if level > 19 else ""
        cmd = f"tar -cf - -C {src} lib | {zstd} -q -T0 {ultra}-{level} -o {out}"
        tool = subprocess.run([zstd, "--version"], capture_output=True, text=True).stdout.strip()
    else:
        import zstandard

        cmd = f"tar -cf - -C {src} lib | {sys.executable} -c '{_PY_ZSTD}' {level} > {out}"
        tool = f"zstandard {zstandard.__version__} (libzstd {zstandard.ZSTD_VERSION}), threads=-1"
    wall, rss, _, _ = run_sampled(["sh", "-c", cmd])
    result = {
        "wall_s": round(wall, 1),
        "peak_rss_mib": rss,
        "output_bytes": out.stat().st_size,
        "tool": tool,
    }
    out.unlink()
    return result


# What condapipe renders for pytorch, torchvision and libtorch (detect_binary_prefix=False in
# render/families/): the engine does not scan binary files for the build prefix.
NO_BINARY_PREFIX_V1 = "  prefix_detection:\n    ignore_binary_files: true\n"
NO_BINARY_PREFIX_V0 = "  detect_binary_files_with_prefix: false\n"


def write_recipe(recipe: Path, src: Path, marks: Path, binary_prefix_scan: bool = False) -> None:
    recipe.mkdir(parents=True, exist_ok=True)
    prefix_v1 = "" if binary_prefix_scan else NO_BINARY_PREFIX_V1
    prefix_v0 = "" if binary_prefix_scan else NO_BINARY_PREFIX_V0
    staged = STAGED_FIX.format()
    v1 = RECIPE_V1.format(src=src, marks=marks, prefix_v1=prefix_v1, staged_fix=staged.replace("'", "''"))
    (recipe / "recipe.yaml").write_text(v1)
    (recipe / "meta.yaml").write_text(META_V0.format(prefix_v0=prefix_v0))
    (recipe / "build.sh").write_text(BUILD_SH.format(src=src, marks=marks, staged_fix=staged))


# flow -> (engine, extra `condapipe build` flags). rattler-build-stage: issue 35's prototype, the
# engine packs its metadata only and condapipe the payload in one streaming pass (--pack-from-stage).
FLOWS = {
    "rattler-build": ("rattler-build", ()),
    "rattler-build-stage": ("rattler-build", ("--pack-from-stage",)),
    "conda-build": ("conda-build", ()),
}
_STAGE_PACK_LINE = re.compile(
    r"condapipe: packed the staged payload into \S+ in ([0-9.]+) s \(zstd \d+, (\d+) threads\)"
)


def condapipe_build(recipe: Path, work: Path, flow: str, level: int, marks: Path) -> dict[str, object]:
    """`condapipe build RECIPE --engine ENGINE --compression-level LEVEL --json`, step by step."""
    engine, extra = FLOWS[flow]
    argv = [sys.executable, "-c", "from condapipe.cli.main import main; main()", "build", str(recipe)]
    argv += ["--engine", engine, *extra]
    argv += ["--output-dir", str(work / "channel"), "--work-dir", str(work / "state"), "--no-test"]
    argv += ["--compression-level", str(level), "--json"]
    wall, rss, samples, out = run_sampled(argv, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    report = json.loads(out[out.index("{") :])
    state = json.loads((work / "state" / "state.json").read_text())["steps"]
    script_end = float((marks / "script_end").read_text())
    script_start = float((marks / "script_start").read_text())
    steps: dict[str, dict[str, object]] = {}
    for step in report["steps"]:
        rec = state.get(step["id"])
        if rec is None:
            continue
        end, start = rec["finished_at"], rec["finished_at"] - rec["seconds"]
        outputs = [o["path"] for o in rec["outputs"]]
        size = sum(Path(p).stat().st_size for p in outputs if Path(p).is_file())
        row = {"wall_s": round(rec["seconds"], 1), "peak_rss_mib": _peak_mib(samples, start, end)}
        row["own_peak_rss_mib"] = _peak_mib(samples, start, end, "own")
        row["children_peak_rss_mib"] = _peak_mib(samples, start, end, "children")
        row["output_bytes"] = size
        if step["kind"] == "build":  # split at the end of the recipe's script
            row["script_s"] = round(script_end - script_start, 1)
            row["packaging_s"] = round(end - script_end, 1)
            row["packaging_peak_rss_mib"] = _peak_mib(samples, script_end, end)
            log = Path(str(rec["data"].get("engine_log", "")))
            found = _STAGE_PACK_LINE.search(log.read_text(errors="replace")) if log.is_file() else None
            if found:  # --pack-from-stage: condapipe's own pass, inside "packaging"
                row["stage_pack_s"], row["stage_pack_threads"] = float(found[1]), int(found[2])
        if step["kind"] == "fix":
            fix = next(iter(rec["data"]["fix"].values()))
            row.update(written=fix["written"], phases=fix["timings"])
        steps[step["kind"]] = row
    whole = {"wall_s": round(wall, 1), "peak_rss_mib": rss, "own_hwm_mib": own_hwm_mib(samples)}
    whole["children_peak_rss_mib"] = _peak_mib(samples, 0, float("inf"), "children")
    return {**whole, "steps": steps}


def engine_final(recipe: Path, work: Path, level: int, marks: Path) -> dict[str, object]:
    """rattler-build alone, packing at the final level itself (no condapipe recompression)."""
    code = (
        "import sys; from pathlib import Path;"
        "from condapipe.engines import RattlerBuildEngine, BuildOptions;"
        "from condapipe.package.channel_index import ensure_channel;"
        f"o = BuildOptions(output_dir=Path({str(work / 'out')!r}), work_dir=Path({str(work / 'w')!r}),"
        f" compression_level={level}, run_tests=False, override_channels=True);"
        "ensure_channel(o.output_dir);"
        f"r = RattlerBuildEngine().build(Path({str(recipe)!r}), o); print(r.packages[0])"
    )
    wall, rss, samples, out = run_sampled([sys.executable, "-c", code])
    end = time.time()
    script_end = float((marks / "script_end").read_text())
    pkg = Path(out.strip().splitlines()[-1])
    return {
        "wall_s": round(wall, 1),
        "packaging_s": round(end - script_end, 1),
        "packaging_peak_rss_mib": _peak_mib(samples, script_end, end),
        "peak_rss_mib": rss,
        "output_bytes": pkg.stat().st_size,
    }


def _code_under_test(level: int) -> dict[str, object]:
    """Which condapipe ran (its folder: PYTHONPATH may name another checkout) and the compression
    threads it gives the engine at `level` (None: a condapipe from before issue 35)."""
    import condapipe
    from condapipe.package.io import PackOptions

    threads = getattr(PackOptions(zstd_level=level), "engine_threads", None)
    return {"code": str(Path(condapipe.__file__).parent), "engine_threads": threads() if threads else None}


def _has_conda_build() -> bool:
    from condapipe.engines.conda_build import find_conda_build

    command = find_conda_build()
    return command is not None and "standins" not in command[0]


def _print_summary(size_mb: int, res: dict[str, object]) -> None:
    """Issue 35's table: the floor, then each step after the engine's script with its own peak
    memory, their sum against the floor in time and in bytes."""
    fl = res.get("floor")
    if not isinstance(fl, dict):
        return
    floor_s, floor_bytes = float(fl["wall_s"]), int(fl["output_bytes"])
    print(
        f"\n## issue 35: {size_mb} MB ({res['input_bytes']:,} bytes), level {res['level']}, "
        f"{res['cpus']} cores, condapipe {res.get('code', '?')}"
    )
    print("| step | seconds | peak memory | bytes | note |\n|---|---:|---:|---:|---|")
    print(
        f"| floor: `tar \\| zstd -T0 -{res['level']}` | {floor_s} | {fl['peak_rss_mib']} MiB "
        f"| {floor_bytes:,} | {fl['tool']} |"
    )
    for engine in FLOWS:
        run = res.get(engine)
        if not isinstance(run, dict):
            continue
        steps = run["steps"]
        build, fix = steps["build"], steps["fix"]
        threads = res.get("engine_threads") or "the engine's default"
        what = f"engine's own relink/prefix scan/pack ({threads} threads wanted)"
        if "stage_pack_s" in build:
            what = (
                f"engine packs info only; condapipe's streaming pass {build['stage_pack_s']} s "
                f"({build['stage_pack_threads']} threads)"
            )
        print(
            f"| {engine}: engine packaging | {build['packaging_s']} | "
            f"{build['packaging_peak_rss_mib']} MiB | {build['output_bytes']:,} | {what} |"
        )
        phases = ", ".join(f"{k} {v:.1f}" for k, v in fix["phases"].items())
        print(
            f"| {engine}: fix | {fix['wall_s']} | {fix['peak_rss_mib']} MiB | {fix['output_bytes']:,} "
            f"| {fix['written']} ({phases}) |"
        )
        for kind in ("verify", "publish"):
            if kind in steps:
                row = steps[kind]
                shown = f"{row['output_bytes']:,}" if row["output_bytes"] else ""
                print(f"| {engine}: {kind} | {row['wall_s']} | {row['peak_rss_mib']} MiB | {shown} | |")
        total = build["packaging_s"] + sum(
            steps[k]["wall_s"] for k in ("fix", "verify", "publish") if k in steps
        )
        peak = max(
            build["packaging_peak_rss_mib"], *(steps[k]["peak_rss_mib"] for k in steps if k != "build")
        )
        published = steps.get("publish", fix)["output_bytes"] or fix["output_bytes"]
        print(
            f"| **{engine}: engine packaging + fix + verify + publish** | **{total:.1f}** | {peak} MiB "
            f"| {published:,} ({published / floor_bytes - 1:+.1%} vs the floor) "
            f"| **{total / floor_s:.2f}x the floor** (target <= 1.15x, bytes <= +1 %) |"
        )


# -- driver --------------------------------------------------------------------------------


def _print_table(size_mb: int, res: dict[str, object]) -> None:
    """The results as a markdown table; the floor's ratios only when the floor ran."""
    _print_summary(size_mb, res)
    fl = res.get("floor")
    floor_s = fl["wall_s"] if isinstance(fl, dict) else None
    print(
        f"\n## {size_mb} MB input ({res['input_bytes']:,} bytes), "
        f"zstd level {res['level']}, {res['cpus']} cores"
    )
    print(
        "| flow / step | wall | peak RSS (all) | condapipe process | its children | output bytes | note |\n"
        "|---|---:|---:|---:|---:|---:|---|"
    )
    if isinstance(fl, dict):
        print(
            f"| floor: tar \\| zstd -T0 -{res['level']} | {fl['wall_s']} s | {fl['peak_rss_mib']} MiB "
            f"| | | {fl['output_bytes']:,} | {fl['tool']} |"
        )
    for engine in FLOWS:
        run = res.get(engine)
        if not isinstance(run, dict):
            continue
        steps = run["steps"]
        for kind, row in steps.items():
            note = ""
            if kind == "build":
                note = f"script (copy) {row['script_s']} s; engine packaging {row['packaging_s']} s"
                if "stage_pack_s" in row:
                    note += f" (of which condapipe's streaming pass {row['stage_pack_s']} s)"
            if kind == "fix":
                note = f"{row['written']}; " + ", ".join(f"{k} {v:.1f} s" for k, v in row["phases"].items())
            print(
                f"| {engine} {kind} | {row['wall_s']} s | {row['peak_rss_mib']} MiB | "
                f"{row['own_peak_rss_mib']} MiB | {row['children_peak_rss_mib']} MiB | "
                f"{row['output_bytes']:,} | {note} |"
            )
        post = steps["build"]["packaging_s"] + steps["fix"]["wall_s"]
        whole = post + sum(steps[k]["wall_s"] for k in ("verify", "publish") if k in steps)
        own = max(row["own_peak_rss_mib"] for kind, row in steps.items() if kind != "build")
        if isinstance(fl, dict) and floor_s:
            size = steps["fix"]["output_bytes"] / fl["output_bytes"] - 1
            print(
                f"| {engine}: engine packaging + fix | {post:.1f} s | | | | | "
                f"{post / floor_s:.2f}x the floor |"
            )
            print(
                f"| **{engine}: engine packaging + fix + verify + publish** | **{whole:.1f} s** | | "
                f"{own} MiB (fix/verify/publish) | | {size:+.1%} vs the floor | "
                f"**{whole / floor_s:.2f}x the floor** (target <= 1.15x, size <= +1 %) |"
            )
        print(
            f"| {engine}: whole `condapipe build` | {run['wall_s']} s | {run['peak_rss_mib']} MiB "
            f"(largest process, wait4) | {run['own_hwm_mib']} MiB (VmHWM) | "
            f"{run['children_peak_rss_mib']} MiB | | |"
        )
    ef = res.get("engine-final")
    if isinstance(ef, dict) and floor_s:
        print(
            f"| rattler-build packing at -{res['level']} itself (no fix) | {ef['packaging_s']} s "
            f"(packaging) | {ef['packaging_peak_rss_mib']} MiB | | | {ef['output_bytes']:,} | "
            f"{ef['packaging_s'] / floor_s:.2f}x the floor |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", "--size", default="580,3400", help="input size(s) in MB, comma-separated")
    ap.add_argument("--level", type=int, default=19, help="the final zstd level (--compression-level)")
    ap.add_argument("--flows", default="floor,rattler-build,conda-build")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument(
        "--binary-prefix-scan",
        action="store_true",
        help="let the engine scan binary files for the prefix (before 2026-11-25 the bench did; "
        "condapipe's pytorch recipes do not)",
    )
    ap.add_argument(
        "--floor-from",
        type=Path,
        help="take the floor from an earlier --json of this bench over the same bytes (the generator's "
        "seed is fixed; the input size is checked): a run that does not fit one 10-minute command",
    )
    ns = ap.parse_args()
    earlier = json.loads(ns.floor_from.read_text()) if ns.floor_from else {}
    base = ns.workdir or Path(tempfile.mkdtemp(prefix="condapipe-postbuild-"))
    flows = ns.flows.split(",")
    results: dict[str, object] = {}
    try:
        for size_mb in (int(s) for s in ns.sizes.split(",")):
            work = base / f"{size_mb}mb"
            shutil.rmtree(work, ignore_errors=True)
            src, marks = work / "src", work / "marks"
            marks.mkdir(parents=True)
            t = time.perf_counter()
            generate(src, size_mb)
            res: dict[str, object] = {
                "level": ns.level,
                "cpus": os.cpu_count(),
                "input_bytes": _size(src / "lib"),
                **_code_under_test(ns.level),
            }
            res["generate_s"] = round(time.perf_counter() - t, 1)
            recipe = work / "recipe"
            write_recipe(recipe, src, marks, ns.binary_prefix_scan)
            res["binary_prefix_scan"] = ns.binary_prefix_scan
            subprocess.run(["sync"], check=False)
            if "floor" in flows:
                res["floor"] = floor(src, work / "floor.tar.zst", ns.level)
                print(f"[{size_mb} MB] floor: {res['floor']}", flush=True)
            elif f"{size_mb}mb" in earlier:
                before = earlier[f"{size_mb}mb"]
                if (before["input_bytes"], before["level"]) != (res["input_bytes"], ns.level):
                    raise SystemExit(f"--floor-from {ns.floor_from}: not the same bytes and level")
                res["floor"] = {**before["floor"], "tool": f"{before['floor']['tool']} (earlier run)"}
            for engine in FLOWS:
                if engine not in flows or (engine == "conda-build" and not _has_conda_build()):
                    continue
                res[engine] = condapipe_build(recipe, work / engine, engine, ns.level, marks)
                print(f"[{size_mb} MB] {engine}: {json.dumps(res[engine])}", flush=True)
                shutil.rmtree(work / engine, ignore_errors=True)
            if "engine-final" in flows:
                res["engine-final"] = engine_final(recipe, work / "engine-final", ns.level, marks)
                print(f"[{size_mb} MB] engine-final: {res['engine-final']}", flush=True)
                shutil.rmtree(work / "engine-final", ignore_errors=True)
            results[f"{size_mb}mb"] = res
            if ns.json:  # after each size: a run cut short still leaves what it measured
                ns.json.write_text(json.dumps(results, indent=2))
            _print_table(size_mb, res)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if ns.workdir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: rpath fix + `.conda` packaging of a PyTorch-shaped package, three ways.

(a) anchor: one `patchelf --set-rpath --force-rpath` subprocess per ELF, sequential, then
    paths.json hashes and `.conda` via conda-package-handling with 1 zstd thread (what
    conda-build does);
(b) condapipe: `fix_prefix` (parallel, in-place edits) + paths.json + `package_io.pack`
    (streaming, multi-threaded zstd) at the same level;
(c) raw `tar | zstd -T0 -LEVEL` over the same bytes: the floor for (b);
(v) `verify_package` on (b)'s output (hashes, rpaths, needed libraries, fatbins).
Each flow runs in its own child process on a fresh copy of the generated tree; wall time
and peak RSS (the child and everything it waited for, from wait4) are printed, plus the
in-place rpath edit time of the largest file. Not a test: it prints numbers.

    python bench/fix_bench.py --workdir /work/tmp/bench                # ~3.2 GB, level 19
    python bench/fix_bench.py --large-mb 200,100 --small 300 --level 19   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from condapipe.hashing import FileDigest

SP = "lib/python3.11/site-packages/torch"
# conda-build pads the host prefix to 255 characters so binaries can be relocated.
PREFIX = "/home/conda/feedstock_root/build_artifacts/pytorch_1700000000000/_h_env" + "_placehold" * 18
CHUNK = 1 << 16


# -- generation -------------------------------------------------------------------------


def _corpus(limit: int = 64 << 20) -> bytes:
    """Real machine code to make payloads compress like shared libraries do."""
    data = bytearray()
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if ".so" in name and os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    data += fh.read(limit - len(data))
            if len(data) >= limit:
                return bytes(data)
    return bytes(data) or random.Random(1).randbytes(1 << 20)


def _write_payload(fh, size: int, rng: random.Random, corpus: bytes) -> None:
    """About 60 % code-like chunks, 40 % incompressible ones (compressed fatbins)."""
    written = 0
    while written < size:
        n = min(CHUNK, size - written)
        if rng.random() < 0.6 and len(corpus) > n:
            start = rng.randrange(0, len(corpus) - n)
            fh.write(corpus[start : start + n])
        else:
            fh.write(rng.randbytes(n))
        written += n


def _base_so(dest: Path) -> Path:
    src = dest.with_suffix(".c")
    src.write_text("int bench_value(void) { return 1; }\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", dest, src, f"-Wl,-rpath,{PREFIX}/lib", "-Wl,--disable-new-dtags"],
        check=True,
    )
    src.unlink()
    return dest


def _big_elf(base: Path, out: Path, size: int, rng: random.Random, corpus: bytes, work: Path) -> None:
    """An ELF with a real (non-loaded) data section of `size` bytes, like a fatbin section."""
    blob = work / "blob.bin"
    with open(blob, "wb") as fh:
        _write_payload(fh, size, rng, corpus)
    if shutil.which("objcopy"):
        subprocess.run(["objcopy", "--add-section", f".bench_payload={blob}", base, out], check=True)
        blob.unlink()
    else:  # trailing data: still a valid ELF, same cost for patchers
        shutil.copy(base, out)
        with open(out, "ab") as dst, open(blob, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
        blob.unlink()


def generate(root: Path, large_mb: list[int], small: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    corpus = _corpus()
    work = root.parent / "gen-scratch"
    work.mkdir(parents=True, exist_ok=True)
    base = _base_so(work / "libbase.so")
    lib = root / SP / "lib"
    lib.mkdir(parents=True)
    names = ["libtorch_cuda.so", "libtorch_cpu.so", "libcudnn_engines.so", "libnccl.so"]
    for i, mb in enumerate(large_mb):
        _big_elf(
            base,
            lib / names[i % len(names)].replace(".so", f"{i // len(names) or ''}.so"),
            mb << 20,
            rng,
            corpus,
            work,
        )
    for i in range(small):
        target = (
            (root / SP / f"_ext{i}.cpython-311-x86_64-linux-gnu.so") if i % 3 == 0 else lib / f"libop{i}.so"
        )
        shutil.copy(base, target)
        with open(target, "ab") as fh:
            _write_payload(fh, rng.randrange(50 << 10, 600 << 10), rng, corpus)
    for i in range(small):  # python files, as many as the extensions
        (root / SP / f"mod{i}.py").write_text(f"# module {i}\n" + "x = 1\n" * rng.randrange(10, 400))
    info = root / "info"
    info.mkdir()
    (info / "index.json").write_text(
        json.dumps(
            {
                "name": "pytorch",
                "version": "2.5.0",
                "build": "bench_0",
                "build_number": 0,
                "depends": [],
                "subdir": "linux-64",
            }
        )
    )
    shutil.rmtree(work)


def _elves(root: Path) -> list[Path]:
    out = []
    for dirpath, _d, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    out.append(p)
    return sorted(out)


def _write_paths_json(root: Path, digests: dict[str, FileDigest]) -> None:
    paths = [
        {"_path": rel, "path_type": "hardlink", "sha256": d.sha256, "size_in_bytes": d.size}
        for rel, d in sorted(digests.items())
    ]
    (root / "info" / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}))
    (root / "info" / "files").write_text("\n".join(sorted(digests)) + "\n")


def _all_files(root: Path) -> list[str]:
    out = []
    for dirpath, _d, files in os.walk(root):
        for f in files:
            rel = (Path(dirpath) / f).relative_to(root).as_posix()
            if not rel.startswith("info/"):
                out.append(rel)
    return sorted(out)


# -- the three flows (each runs in a child process) ------------------------------------------


def flow_anchor(root: Path, out: Path, level: int) -> None:
    from conda_package_handling.conda_fmt import CondaFormat_v2

    from condapipe.fix.patchers import patchelf_binary
    from condapipe.fix.rpath import origin_relative
    from condapipe.hashing import hash_file

    patchelf = patchelf_binary()
    for elf in _elves(root):
        rpath = origin_relative("lib", elf.relative_to(root).as_posix())  # conda-build's build/rpaths
        subprocess.run([patchelf, "--set-rpath", rpath, "--force-rpath", str(elf)], check=True)
    files = _all_files(root)
    _write_paths_json(root, {rel: hash_file(root / rel) for rel in files})
    members = sorted(["info/index.json", "info/paths.json", "info/files", *files])
    CondaFormat_v2.create(
        str(root),
        members,
        out.name,
        out_folder=str(out.parent),
        compression_level=level,
        compression_threads=1,
    )


def flow_condapipe(root: Path, out: Path, level: int, threads: int, max_memory_mib: int = 1024) -> None:
    from condapipe.fix.fixer import FixOptions, fix_prefix
    from condapipe.hashing import hash_file
    from condapipe.package.io import PackOptions, pack

    report = fix_prefix(root, FixOptions(build_prefixes=(PREFIX,)))
    if report.errors:
        raise SystemExit(f"fix failed: {report.errors[:3]}")
    files = _all_files(root)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        digests = dict(zip(files, pool.map(lambda r: hash_file(root / r), files), strict=True))
    _write_paths_json(root, digests)
    options = PackOptions(zstd_level=level, threads=threads, max_memory_mib=max_memory_mib)
    pack(root, out, options)
    print(json.dumps({"zstd_threads": options.zstd_threads()}), file=sys.stderr)
    used: dict[str, int] = {}
    for f in report.changed:
        used[f.patcher or "-"] = used.get(f.patcher or "-", 0) + 1
    print(json.dumps({"patchers": used}), file=sys.stderr)


def flow_verify(package: Path) -> None:
    from condapipe.verify.verifier import verify_package

    report = verify_package(package, dep_libs=("*",))
    print(json.dumps({"verify_ok": report.ok, "errors": report.errors[:3]}), file=sys.stderr)
    if not report.ok:
        raise SystemExit("verify failed")


def flow_zstd(root: Path, out: Path, level: int) -> None:
    ultra = ["--ultra"] if level > 19 else []
    tar = subprocess.Popen(["tar", "-cf", "-", "-C", str(root), "."], stdout=subprocess.PIPE)
    subprocess.run(["zstd", "-q", "-T0", f"-{level}", *ultra, "-o", str(out)], stdin=tar.stdout, check=True)
    tar.stdout.close()  # type: ignore[union-attr]
    if tar.wait() != 0:
        raise SystemExit("tar failed")


def inplace_edit_ms(path: Path) -> float:
    from condapipe.fix.patchers import Change, InPlacePatcher

    t = time.perf_counter()
    InPlacePatcher().apply(path, Change(rpath="$ORIGIN:$ORIGIN/../../../.."))
    return (time.perf_counter() - t) * 1000


# -- driver --------------------------------------------------------------------------------


def _run_child(args: list[str]) -> tuple[float, int]:
    """Run this script as a child; (wall seconds, peak RSS in MiB of it and its children)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, *args])
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"flow {args} failed")
    return wall, usage.ru_maxrss // 1024


def _copy_tree(src: Path, dst: Path) -> None:
    subprocess.run(["cp", "-a", "--reflink=auto", str(src), str(dst)], check=True)


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: a temp dir)")
    ap.add_argument("--large-mb", default="2048,1100", help="sizes of the big .so files in MiB")
    ap.add_argument("--small", type=int, default=300, help="number of small .so files")
    ap.add_argument("--level", type=int, default=19, help="zstd level for all flows")
    ap.add_argument("--threads", type=int, default=0, help="zstd threads for (b) (0: all cores)")
    ap.add_argument(
        "--flows", default="a,b,c", help="which flows to run (b-nocap: (b) without the memory cap)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--reuse", action="store_true", help="reuse files generated by an earlier --keep run")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--run-flow", help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.run_flow:
        {
            "a": lambda: flow_anchor(ns.root, ns.out, ns.level),
            "b": lambda: flow_condapipe(ns.root, ns.out, ns.level, ns.threads),
            "b-nocap": lambda: flow_condapipe(ns.root, ns.out, ns.level, ns.threads, max_memory_mib=0),
            "c": lambda: flow_zstd(ns.root, ns.out, ns.level),
            "v": lambda: flow_verify(ns.out),
            "gen": lambda: generate(ns.root, [int(x) for x in ns.large_mb.split(",") if x], ns.small),
            "edit": lambda: ns.out.write_text(f"{inplace_edit_ms(ns.root):.3f}"),
        }[ns.run_flow]()
        return

    work = ns.workdir or Path(tempfile.mkdtemp(prefix="condapipe-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "src"
    results: dict[str, object] = {"cpus": os.cpu_count(), "level": ns.level}
    try:
        if src.exists() and not ns.reuse:
            shutil.rmtree(src)
        # everything heavy runs in children, so the driver stays small: a child's peak RSS
        # (wait4) starts from its parent's size at spawn time
        t = time.perf_counter()
        if not src.exists():
            gen = [
                "--run-flow",
                "gen",
                "--root",
                str(src),
                "--large-mb",
                ns.large_mb,
                "--small",
                str(ns.small),
            ]
            _run_child(gen)
        results["generate_s"] = round(time.perf_counter() - t, 1)
        results["input_bytes"] = _size(src)
        results["elf_files"] = len(_elves(src))
        largest = max(_elves(src), key=lambda p: p.stat().st_size)
        results["largest_file_bytes"] = largest.stat().st_size
        for flow in ns.flows.split(","):
            if flow == "v":  # verify what (b) wrote
                made = next(work.glob("out-b*/*.conda"))
                wall, rss = _run_child(["--run-flow", "v", "--out", str(made)])
                results["v"] = {
                    "wall_s": round(wall, 1),
                    "peak_rss_mib": rss,
                    "package_bytes": made.stat().st_size,
                }
                print(f"(v) verify {made.name}: wall {wall:8.1f} s   peak RSS {rss:6d} MiB", flush=True)
                continue
            tree = work / f"tree-{flow}"
            if tree.exists():
                shutil.rmtree(tree)
            _copy_tree(src, tree)
            out = work / f"out-{flow}" / ("raw.tar.zst" if flow == "c" else "pytorch-2.5.0-bench_0.conda")
            out.parent.mkdir(exist_ok=True)
            subprocess.run(["sync"], check=False)
            wall, rss = _run_child(
                [
                    "--run-flow",
                    flow,
                    "--root",
                    str(tree),
                    "--out",
                    str(out),
                    "--level",
                    str(ns.level),
                    "--threads",
                    str(ns.threads),
                ]
            )
            results[flow] = {
                "wall_s": round(wall, 1),
                "peak_rss_mib": rss,
                "output_bytes": out.stat().st_size,
            }
            print(
                f"({flow}) wall {wall:8.1f} s   peak RSS {rss:6d} MiB   output {out.stat().st_size:,} bytes",
                flush=True,
            )
            shutil.rmtree(tree)
            if flow == "c":
                out.unlink()
            if flow.startswith("b") and "inplace_edit_ms" not in results:
                edit = work / "edit" / largest.name
                edit.parent.mkdir(exist_ok=True)
                _copy_tree(largest, edit)
                ms_file = work / "edit" / "ms.txt"
                _run_child(["--run-flow", "edit", "--root", str(edit), "--out", str(ms_file)])
                results["inplace_edit_ms"] = float(ms_file.read_text())
                edit.unlink()
        a, b, c = (results.get(k) for k in ("a", "b", "c"))
        if isinstance(a, dict) and isinstance(b, dict):
            results["speedup_b_vs_a"] = round(a["wall_s"] / b["wall_s"], 2)
            results["size_b_vs_a_pct"] = round(100 * (b["output_bytes"] / a["output_bytes"] - 1), 2)
        if isinstance(b, dict) and isinstance(c, dict):
            results["b_over_c"] = round(b["wall_s"] / c["wall_s"], 2)
        nocap = results.get("b-nocap")
        if isinstance(nocap, dict) and isinstance(c, dict):
            results["b_nocap_over_c"] = round(nocap["wall_s"] / c["wall_s"], 2)
        if isinstance(nocap, dict) and isinstance(a, dict):
            results["speedup_b_nocap_vs_a"] = round(a["wall_s"] / nocap["wall_s"], 2)
        print(json.dumps(results, indent=2))
        if ns.json:
            ns.json.write_text(json.dumps(results, indent=2))
    finally:
        if not ns.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

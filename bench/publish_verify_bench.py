#!/usr/bin/env python3
"""Benchmark: verify and publish of one big package, without the level-19 pass around them.

postbuild_bench.py measures the whole path, whose cost is dominated by the one zstd-19 pass; this
one isolates the two steps issue 27 made cheap, on a PyTorch-shaped package (fix_bench's tree,
packed as a draft at zstd 1 so that making it costs little):

  fix      fix_package with keep_tree (the tree stays beside the output; nothing to rewrite here)
  verify   verify_package of the fixed package (reads the kept tree when the code has one)
  publish  publish_packages into an empty channel (link or copy, then the index)

Each step runs in a child process (wall time, peak RSS from wait4) against the condapipe code in
--code (default: this checkout), so the same command with `--code OTHER_CHECKOUT/pipeline` gives
the numbers of another revision on the same bytes.

    python bench/publish_verify_bench.py --size 580
    python bench/publish_verify_bench.py --size 580 --code /path/to/main/pipeline
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

STEPS = {
    "fix": """
import inspect, sys
from pathlib import Path
from condapipe.fix.fixer import FixOptions, fix_package
from condapipe.package.io import PackOptions
kw = {"keep_tree": True} if "keep_tree" in inspect.signature(fix_package).parameters else {}
r = fix_package(Path(sys.argv[1]), FixOptions(), output_dir=Path(sys.argv[2]),
                pack_options=PackOptions(zstd_level=1), **kw)
print(r.written, bool(kw))
""",
    "verify": """
import sys
from pathlib import Path
from condapipe.verify.verifier import verify_package
r = verify_package(Path(sys.argv[1]))
print(r.ok, r.files_checked, r.errors[:2])
""",
    "publish": """
import sys
from pathlib import Path
from condapipe.publish.local_channel import publish_packages
outcomes, index = publish_packages(Path(sys.argv[2]), [Path(sys.argv[1])])
print(outcomes[0].status.value, index.subdirs if index else None)
""",
}


def run_step(code_dir: Path, step: str, *args: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", STEPS[step], *args], env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    said = proc.stdout.read().decode().strip()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{step} failed: {said}")
    return {"wall_s": round(wall, 2), "peak_rss_mib": usage.ru_maxrss // 1024, "said": said}


def make_draft(work: Path, size_mb: int) -> Path:
    """fix_bench's PyTorch-shaped tree (postbuild_bench's proportions), as an unpacked package,
    packed at zstd 1 (fix finds nothing to change in it: the bench's rpaths are already relative)."""
    import postbuild_bench

    from condapipe.package.io import PackOptions, pack

    src = work / "src"
    postbuild_bench.generate(src, size_mb)
    root = work / "pkgroot"
    shutil.copytree(src / "lib", root / "lib", symlinks=True)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())
    info = root / "info"
    info.mkdir()
    index = {"name": "torchshape", "version": "1.0.0", "build": "0", "build_number": 0, "subdir": "linux-64"}
    (info / "index.json").write_text(json.dumps(index))
    (info / "files").write_text("\n".join(files) + "\n")
    from condapipe.hashing import hash_file

    entries = []
    for rel in files:
        digest = hash_file(root / rel)
        entries.append(
            {"_path": rel, "path_type": "hardlink", "sha256": digest.sha256, "size_in_bytes": digest.size}
        )
    (info / "paths.json").write_text(json.dumps({"paths": entries, "paths_version": 1}))
    shutil.rmtree(src)
    out = pack(root, work / "engine" / "torchshape-1.0.0-0.conda", PackOptions(zstd_level=1))
    shutil.rmtree(root)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=580, help="input size in MB")
    ap.add_argument("--code", type=Path, default=HERE.parent / "pipeline", help="condapipe code to measure")
    ap.add_argument("--workdir", type=Path)
    ns = ap.parse_args()
    work = ns.workdir or Path(tempfile.mkdtemp(prefix="condapipe-pvbench-"))
    try:
        draft = make_draft(work, ns.size)
        fixed_dir = work / "fix"
        results = {"package_bytes": draft.stat().st_size, "cpus": os.cpu_count(), "code": str(ns.code)}
        results["fix"] = run_step(ns.code, "fix", str(draft), str(fixed_dir))
        fixed = fixed_dir / draft.name
        results["verify"] = run_step(ns.code, "verify", str(fixed))
        results["publish"] = run_step(ns.code, "publish", str(fixed), str(work / "channel"))
        print(json.dumps(results, indent=2))
        print(
            f"\n| step | wall | peak RSS | ({ns.size} MB tree, {results['package_bytes']:,} byte package) |"
        )
        print("|---|---:|---:|---|")
        for step in ("fix", "verify", "publish"):
            row = results[step]
            assert isinstance(row, dict)
            print(f"| {step} | {row['wall_s']} s | {row['peak_rss_mib']} MiB | {row['said']} |")
    finally:
        if ns.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Pack a real PyTorch tree (scripts/pytorch_tree/assemble.py) for a CPU-only build elsewhere.

The lent GPU machine takes at most 64 MiB a call, and a whole tree with its submodules is ~180 MB
compressed. cpu_bundle.yaml lists what a CPU-only build never reads, each with the reason; this
writes the rest as a deterministic tar compressed with zstd (`--level`, default 19) and prints the
sizes. Nothing is read outside TREE and nothing is written but OUT (temp name, then rename).

usage: cpu_bundle.py TREE OUT.tar.zst [--level N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
from pathlib import Path

import yaml
import zstandard

HERE = Path(__file__).resolve().parent


def excluded(spec: Path = HERE / "cpu_bundle.yaml") -> set[str]:
    data = yaml.safe_load(spec.read_text())
    return {str(e["path"]).strip("/") for e in data["exclude"]}


def members(tree: Path, skip: set[str]) -> list[Path]:
    """Every file, link and folder of TREE not under a skipped path, sorted; symlinks are not followed."""
    out: list[Path] = []
    for root, dirs, files in os.walk(tree):
        rel_root = Path(root).relative_to(tree)
        for d in dirs:  # an excluded folder keeps its top-level files: setup.py checks every
            rel = rel_root / d  # submodule folder for a LICENSE/CMakeLists.txt before building
            if rel.as_posix() in skip:
                out.append(rel)
                top = (f for f in (tree / rel).iterdir() if f.is_file() and not f.is_symlink())
                out += sorted(rel / f.name for f in top)
        dirs[:] = sorted(d for d in dirs if (rel_root / d).as_posix() not in skip)
        out += [rel_root / d for d in dirs]
        out += [rel_root / f for f in sorted(files) if (rel_root / f).as_posix() not in skip]
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--level", type=int, default=19)
    args = ap.parse_args(argv)
    tree = args.tree.resolve()
    if not (tree / "version.txt").is_file() or not (tree / "setup.py").is_file():
        print(f"error: {tree} is not a PyTorch source tree (no version.txt/setup.py)", file=sys.stderr)
        return 2
    top = tree.name  # the folder --source gets on the other machine
    tmp = args.out.with_name(f".{args.out.name}.part")
    raw = 0
    cctx = zstandard.ZstdCompressor(level=args.level, threads=-1)
    with tmp.open("wb") as fh, cctx.stream_writer(fh) as zst, tarfile.open(fileobj=zst, mode="w|") as tar:
        for rel in members(tree, excluded()):
            info = tar.gettarinfo(str(tree / rel), arcname=f"{top}/{rel.as_posix()}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isfile():
                raw += info.size
                with (tree / rel).open("rb") as src:
                    tar.addfile(info, src)
            else:
                tar.addfile(info)
    tmp.replace(args.out)
    size = args.out.stat().st_size / 2**20
    print(f"{args.out}: {size:.1f} MiB from {raw / 2**20:.1f} MiB of files ({top})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

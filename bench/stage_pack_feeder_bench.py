"""Time --pack-from-stage's feeder and the package hash alone, on this machine (issue 35).

Two parts of the streaming pass (condapipe.package.stage_pack), apart from zstd's own work:
  feeder: `_write_payload` over a generated payload at a cheap level (1: zstd is not the
          bottleneck, the thread that reads, hashes, scans, tars and feeds it is), all cores;
  hash:   `hash_file(package, md5=True)`, the package's sha256 + md5 after the pass.
It prints wall seconds, MB/s, and digests of what was written (the compressed payload and its
paths.json entries), so that two trees (PYTHONPATH=<other tree>/pipeline) can be compared for
speed and for identical bytes. The payload is generated once into --workdir and reused.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import time
from pathlib import Path
from typing import IO, cast

PREFIX = "/opt/bench/host_env_placehold_placehold_placehold_placehold"
MIB = 1 << 20


def generate(payload: Path, total_mib: int) -> None:
    """Library-like files (half random, half repeated blocks), text files holding the prefix."""
    if (payload / ".done").exists():
        return
    rng = random.Random(35)
    (payload / "lib").mkdir(parents=True, exist_ok=True)
    (payload / "share").mkdir(exist_ok=True)
    written, n = 0, 0
    while written < total_mib * MIB:
        size = rng.choice([1, 4, 16, 64]) * MIB + rng.randrange(4096)
        with open(payload / "lib" / f"lib{n}.so", "wb") as fh:
            left = size
            while left > 0:
                block = os.urandom(min(left, MIB // 2)) + bytes(min(left, MIB) // 2)
                fh.write(block[:left])
                left -= len(block[:left])
        (payload / "share" / f"cfg{n}.txt").write_text(f"prefix={PREFIX}\n" * 200)
        written += size
        n += 1
    (payload / ".done").write_text("")


def bench_feeder(payload: Path, level: int) -> dict[str, object]:
    from condapipe.package.io import PackOptions
    from condapipe.package.stage_pack import _members, _write_payload

    names = [n for n in _members(payload) if n != ".done"]
    total = sum((payload / n).stat().st_size for n in names)
    out = _Digesting()
    start = time.perf_counter()
    sink = cast(IO[bytes], out)
    entries = _write_payload(payload, PREFIX, names, sink, PackOptions(zstd_level=level), 0, False)
    wall = time.perf_counter() - start
    return {
        "feeder_wall_s": round(wall, 2),
        "input_mib": round(total / MIB),
        "mib_per_s": round(total / MIB / wall),
        "output_bytes": out.size,
        "output_sha256": out.sha.hexdigest(),
        "paths_sha256": hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest(),
    }


class _Digesting(io.RawIOBase):
    """A sink that keeps only the sha256 and size of what is written (the zip entry's place)."""

    def __init__(self) -> None:
        self.sha, self.size = hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]
        self.sha.update(view)
        self.size += view.nbytes
        return view.nbytes


def bench_hash(workdir: Path, size_mib: int) -> dict[str, object]:
    from condapipe.hashing import hash_file

    path = workdir / f"package-{size_mib}.bin"
    if not path.exists() or path.stat().st_size != size_mib * MIB:
        with open(path, "wb") as fh:
            for _ in range(size_mib):
                fh.write(os.urandom(MIB))
    hash_file(path)  # into the page cache, as the pass leaves the package it just wrote
    start, cpu = time.perf_counter(), time.process_time()
    digest = hash_file(path, md5=True)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "hash_wall_s": round(wall, 2),
        "hash_cpu_s": round(cpu, 2),  # ~wall: one core did both digests; up to 2x wall: two did
        "read_sha256_only_s": _one_digest(path, "sha256"),
        "read_md5_only_s": _one_digest(path, "md5"),
        "hash_mib": size_mib,
        "sha256": digest.sha256,
        "md5": digest.md5,
    }


def _one_digest(path: Path, name: str) -> float:
    """One digest alone, as one thread reading in hash_file's chunks (the two parts' own costs)."""
    digest, start = hashlib.new(name), time.perf_counter()
    with open(path, "rb") as fh:
        while chunk := fh.read(MIB):
            digest.update(chunk)
    return round(time.perf_counter() - start, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--payload-mib", type=int, default=1024)
    ap.add_argument("--hash-mib", type=int, default=1024)
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--parts", default="feeder,hash", help="feeder, hash or both (comma-separated)")
    args = ap.parse_args()
    import condapipe

    args.workdir.mkdir(parents=True, exist_ok=True)
    generate(args.workdir / "payload", args.payload_mib)
    print(f"code: {Path(condapipe.__file__).parent}; cores: {len(os.sched_getaffinity(0))}", flush=True)
    parts = set(args.parts.split(","))
    for _ in range(args.repeat):
        if "feeder" in parts:
            print(json.dumps(bench_feeder(args.workdir / "payload", args.level)), flush=True)
        if "hash" in parts:
            print(json.dumps(bench_hash(args.workdir, args.hash_mib)), flush=True)


if __name__ == "__main__":
    main()

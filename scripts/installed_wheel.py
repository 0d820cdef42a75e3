#!/usr/bin/env python3
"""Write the wheel of an installed distribution back out of its site-packages, from its RECORD.

The lent GPU machines have NVIDIA's CUDA library wheels installed in their python (nvidia-cublas,
nvidia-cudnn-cu13, nvidia-nccl-cu13, ...; 1-3 GB together), but carrying the wheel files there costs
a call per 60 MiB. A wheel is a zip of exactly the files its RECORD lists (plus the RECORD itself),
so the installed files are enough to make it again; each file is checked against RECORD's sha256
before it is written (a file changed since the install is refused), and the zip is stored, not
deflated (the libraries are large and `condapipe wheels` compresses them anyway). Nothing is
written but OUT_DIR/<name>-<version>-<tag>.whl (temp name, then rename).

usage: installed_wheel.py OUT_DIR DIST [DIST ...]   (run with the python the distributions are in)
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import sys
import zipfile
from importlib import metadata
from pathlib import Path


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def rewheel(dist: metadata.Distribution, out_dir: Path) -> Path:
    name = dist.metadata["Name"].replace("-", "_")
    version = dist.version
    records = [f for f in dist.files or () if f.name == "RECORD" and f.parent.name.endswith(".dist-info")]
    entry = records[0] if records else None
    if entry is None:
        raise SystemExit(f"{name}: no RECORD (not installed from a wheel)")
    info = Path(str(dist.locate_file(entry))).parent
    site = info.parent
    tags = [line.split(":", 1)[1].strip() for line in (info / "WHEEL").read_text().splitlines()
            if line.startswith("Tag:")]  # fmt: skip
    if not tags:
        raise SystemExit(f"{name}: its WHEEL names no tag")
    py = ".".join(sorted({t.split("-")[0] for t in tags}))
    abi = ".".join(sorted({t.split("-")[1] for t in tags}))
    plat = ".".join(sorted({t.split("-")[2] for t in tags}))
    dest = out_dir / f"{name}-{version}-{py}-{abi}-{plat}.whl"
    tmp = dest.with_name(f".{dest.name}.tmp")
    record = info / "RECORD"
    rows = list(csv.reader(record.read_text().splitlines()))
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as whl:
        for row in rows:
            if not row or not row[0]:
                continue
            rel, digest = row[0], (row[1] if len(row) > 1 else "")
            path = (site / rel).resolve()
            if rel.endswith(".pyc") or "__pycache__" in rel:
                continue  # compiled at install time; not part of the wheel
            if path == record.resolve():
                continue
            if not path.is_relative_to(site.resolve()):
                continue  # scripts installed to ../../bin are not library files
            if digest and _digest(path) != digest:
                tmp.unlink(missing_ok=True)
                raise SystemExit(f"{name}: {rel} differs from its RECORD hash; reinstall it first")
            whl.write(path, rel)
        whl.writestr(f"{info.name}/RECORD", record.read_text())
    os.replace(tmp, dest)
    return dest


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:]:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            print(f"{name}: not installed in {sys.executable}", file=sys.stderr)
            return 1
        path = rewheel(dist, out_dir)
        print(f"{path.name} {path.stat().st_size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

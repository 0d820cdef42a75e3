"""Real, minimal conda packages for tests: index.json, paths.json, files and one payload file.

Built with conda-package-handling (the reference implementation), so every reader in the
ecosystem (py-rattler, anaconda-client, conda-package-streaming) accepts them.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import conda_package_handling.api as cph

FIXED_TIMESTAMP_MS = 1_700_000_000_000


def make_package(
    out_dir: Path,
    name: str,
    version: str = "1.0",
    *,
    build: str = "0",
    build_number: int = 0,
    subdir: str = "noarch",
    depends: Sequence[str] = (),
    payload: bytes | None = None,
    payload_size: int = 0,
    fmt: str = ".conda",
    extra_index: dict | None = None,
    wrong_hash: bool = False,
) -> Path:
    """Write {name}-{version}-{build}{fmt} into out_dir and return its path.

    payload_size > 0 writes that many random bytes (incompressible) instead of `payload`.
    wrong_hash=True records a wrong sha256 in paths.json: a defective package verify must catch.
    """
    out_dir = Path(out_dir).absolute()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "info").mkdir()
        rel = f"share/{name}/{name}-{version}.txt"
        target = root / rel
        target.parent.mkdir(parents=True)
        sha = hashlib.sha256()
        with target.open("wb") as fh:
            if payload_size:
                left = payload_size
                while left:
                    chunk = os.urandom(min(left, 1 << 20))
                    fh.write(chunk)
                    sha.update(chunk)
                    left -= len(chunk)
            else:
                data = payload if payload is not None else f"{name} {version} {build}\n".encode()
                fh.write(data)
                sha.update(data)
        size = target.stat().st_size
        index = {
            "name": name,
            "version": version,
            "build": build,
            "build_number": build_number,
            "depends": list(depends),
            "subdir": subdir,
            "timestamp": FIXED_TIMESTAMP_MS,
            "license": "BSD-3-Clause",
        }
        if subdir == "noarch":
            index["noarch"] = "generic"
        else:
            index["platform"], index["arch"] = subdir.split("-")[0], "x86_64"
        index.update(extra_index or {})
        (root / "info" / "index.json").write_text(json.dumps(index, indent=2))
        paths = {
            "paths": [
                {
                    "_path": rel,
                    "path_type": "hardlink",
                    "sha256": "0" * 64 if wrong_hash else sha.hexdigest(),
                    "size_in_bytes": size,
                }
            ],
            "paths_version": 1,
        }
        (root / "info" / "paths.json").write_text(json.dumps(paths, indent=2))
        (root / "info" / "files").write_text(rel + "\n")
        (root / "info" / "about.json").write_text(json.dumps({"summary": f"test package {name}"}))
        filename = f"{name}-{version}-{build}{fmt}"
        files = ["info/index.json", "info/paths.json", "info/files", "info/about.json", rel]
        level = {"compression_level": 1} if fmt == ".conda" else {}  # tests need valid, not small
        cph.create(str(root), files, filename, out_folder=str(out_dir), **level)
    return out_dir / filename

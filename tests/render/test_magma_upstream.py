"""Opt-in (`pytest -m upstream`): the real magma, rebuilt for one arch by `condapipe build magma`.

Needs what CI does not have: a generated magma release tree or tarball (git tag + magma's own
`make generate`; never part of this repository) in $CONDAPIPE_MAGMA_TREE, an nvcc whose toolkit
has cuBLAS, and the cmake/ninja wheels installed next to condapipe (`--build-tools wheels`: the
build is offline). $CONDAPIPE_MAGMA_ARCH picks the arch (default 9.0). It takes about 5 minutes
on 16 cores and much longer on 2. On a GPU machine the package's own test also links and runs a
magma_dgesv_gpu program (scripts/magma_gpu_proof.sh does that, and more, in one command).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import build_json, condapipe, install

from condapipe.buildspec.arch import parse_arch_list
from condapipe.elf.archive import read_archive_fatbins

pytestmark = pytest.mark.upstream

TREE = os.environ.get("CONDAPIPE_MAGMA_TREE", "")
ARCH = os.environ.get("CONDAPIPE_MAGMA_ARCH", "9.0")


def _nvcc_cuda() -> str | None:
    if not shutil.which("nvcc"):
        return None
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def _missing() -> str | None:
    if not TREE or not Path(TREE).exists():
        return "set CONDAPIPE_MAGMA_TREE to a generated magma release tree or tarball"
    if _nvcc_cuda() is None:
        return "no nvcc on PATH"
    for tool in ("cmake", "ninja"):
        try:
            importlib.metadata.distribution(tool)
        except importlib.metadata.PackageNotFoundError:
            return f"pip install {tool} (the build takes its tools from the wheels, offline)"
    return None


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
def test_real_magma_builds_offline_and_libmagma_holds_exactly_the_arch(tmp_path: Path) -> None:
    cuda = _nvcc_cuda() or ""
    report = build_json(
        "magma", "--cuda", cuda, "--arch", ARCH, "--source", TREE, "--build-tools", "wheels",
        "--output-dir", str(tmp_path / "channel"), "--work-dir", str(tmp_path / "work"),
        cwd=tmp_path,
    )  # fmt: skip
    (pkg,) = (Path(p) for p in report["packages"])
    assert pkg.name.startswith(f"magma-cuda{cuda.replace('.', '')}-")
    code, out, _err = condapipe("verify", str(pkg), "--json", cwd=tmp_path)
    verdict = json.loads(out[out.index("[") :])[0]
    assert code == 0 and verdict["ok"], verdict["errors"]
    want = sorted(parse_arch_list(ARCH).sass())
    assert verdict["fatbins"]["lib/libmagma.a"]["sass"] == want
    install(tmp_path / "channel", [pkg.name.rsplit("-", 2)[0]], tmp_path / "prefix", tmp_path / "cache")
    lib = read_archive_fatbins(tmp_path / "prefix" / "lib" / "libmagma.a")
    assert lib.members > 1000 and sorted(lib.sass) == want and not lib.ptx
    assert not (tmp_path / "prefix" / "lib" / "libmagma_sparse.a").exists()
    assert (tmp_path / "prefix" / "include" / "magma_v2.h").is_file()

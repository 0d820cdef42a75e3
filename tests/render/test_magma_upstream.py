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

from condapipe.elf.archive import read_archive_fatbins
from condapipe.facts.arch import parse_arch_list

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


SYMBOLS = Path(__file__).resolve().parents[2] / "scripts" / "magma_symbols.py"


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
@pytest.mark.skipif(
    not Path(TREE).is_dir(), reason="the symbol check reads the generated tree: give a directory"
)
def test_libmagma_defines_every_function_its_headers_declare_that_upstream_builds(tmp_path: Path) -> None:
    # The CUDA-12 patch once left magmablas_?gemm undefined (it dropped the only files defining them).
    # Every function the installed headers declare is linked with --no-undefined into a shared object;
    # the only names allowed to be missing are those upstream's own library list never builds
    # (2.6.1 declares 124 such, e.g. magma_dgetrf2), found in the tree itself, not in a list here.
    cuda = _nvcc_cuda() or ""
    build_json(
        "magma", "--cuda", cuda, "--arch", ARCH, "--source", TREE, "--build-tools", "wheels",
        "--output-dir", str(tmp_path / "channel"), "--work-dir", str(tmp_path / "work"),
        cwd=tmp_path,
    )  # fmt: skip
    install(
        tmp_path / "channel", [f"magma-cuda{cuda.replace('.', '')}"], tmp_path / "prefix", tmp_path / "cache"
    )
    nvcc = Path(shutil.which("nvcc") or "nvcc").resolve()
    cuda_libs = [
        nvcc.parent.parent / "lib64",
        *map(Path, filter(None, os.environ.get("CONDAPIPE_CUDA_LIBS", "").split(":"))),
    ]
    cuda_incs = [
        nvcc.parent.parent / "include",
        *map(Path, filter(None, os.environ.get("CPATH", "").split(":"))),
    ]
    args = [str(tmp_path / "prefix" / "lib" / "libmagma.a"), str(tmp_path / "prefix" / "include")]
    args += [x for d in cuda_libs for x in ("--cuda-lib", str(d))]
    args += [x for d in cuda_incs for x in ("--cuda-include", str(d))]
    result = subprocess.run(
        ["python3", str(SYMBOLS), *args, "--source", TREE, "--json", str(tmp_path / "symbols.json")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    report = json.loads((tmp_path / "symbols.json").read_text())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert {"magmablas_sgemm", "magmablas_dgemm", "magmablas_cgemm", "magmablas_zgemm"}.isdisjoint(
        report["lost_by_build"]
    )

"""A CUDA PyTorch package must hold the magma it promises: pytorch links libmagma.a statically on
linux-64 (no DT_NEEDED shows it), so verify looks for magma's `magma_init` defined in one of the
package's ELF files and refuses a CUDA package without it (a build that silently lost USE_MAGMA).

The libraries are real: nvcc 13.0 compiles the CUDA one (sm_90), gcc the linalg one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from elfkit import NVCC, gcc_shared, make_package, nvcc_shared, write_metadata

from condapipe.cli.main import main
from condapipe.verify.verifier import verify_package

pytestmark = pytest.mark.skipif(not Path(NVCC).exists(), reason="nvcc not installed")

LINALG = "lib/python3.12/site-packages/torch/lib/libtorch_cuda_linalg.so"
WITH_MAGMA = "int magma_init(void) { return 0; }\nint torch_linalg(void) { return magma_init(); }\n"
CALLS_MAGMA_ONLY = "extern int magma_init(void);\nint torch_linalg(void) { return magma_init(); }\n"
WITHOUT_MAGMA = "int torch_linalg(void) { return 0; }\n"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kern") / "libtorch_cuda.so"
    return nvcc_shared(out, ("arch=compute_90,code=sm_90",), ("-Xlinker", "-rpath=$ORIGIN"))


def torch_package(
    kernel: Path, where: Path, linalg_source: str, *, cuda: str | None = "13.0", subdir: str = "linux-64"
) -> Path:
    root = where / "tree"
    lib = root / LINALG.rsplit("/", 1)[0]
    lib.mkdir(parents=True)
    shutil.copy(kernel, lib / "libtorch_cuda.so")
    gcc_shared(root / LINALG, linalg_source)
    write_metadata(root, name="pytorch", version="2.6.0", subdir=subdir)
    about: dict = {"summary": "pytorch"}
    if cuda is not None:
        about["extra"] = {"condapipe": {"cuda": cuda, "cuda_archs": "9.0"}}
    (root / "info" / "about.json").write_text(json.dumps(about))
    return make_package(root, where / "pytorch-2.6.0-0.conda")


def test_a_cuda_pytorch_package_with_magma_linked_in_passes_and_says_where(
    kernel: Path, tmp_path: Path
) -> None:
    pkg = torch_package(kernel, tmp_path, WITH_MAGMA)
    report = verify_package(pkg)
    assert report.ok, report.errors
    assert report.static_links == {"magma": LINALG}
    result = CliRunner().invoke(main, ["verify", str(pkg)])
    assert result.exit_code == 0, result.output
    assert f"magma linked statically into {LINALG}" in result.stdout


def test_a_cuda_pytorch_package_without_magma_is_refused(kernel: Path, tmp_path: Path) -> None:
    report = verify_package(torch_package(kernel, tmp_path, WITHOUT_MAGMA))
    assert report.errors == [
        "magma is not linked: a CUDA pytorch package for linux-64 links it statically, "
        "and no ELF file defines magma_init"
    ]


def test_a_library_that_only_calls_magma_does_not_count_as_linking_it(kernel: Path, tmp_path: Path) -> None:
    """An undefined reference would fail at import; only a definition shows the archive is in."""
    report = verify_package(torch_package(kernel, tmp_path, CALLS_MAGMA_ONLY))
    assert not report.ok and report.errors[0].startswith("magma is not linked")


def test_a_cpu_package_and_a_jetson_package_are_not_asked_for_magma(kernel: Path, tmp_path: Path) -> None:
    cpu = verify_package(torch_package(kernel, tmp_path / "cpu", WITHOUT_MAGMA, cuda=None))
    assert cpu.ok and cpu.static_links == {}
    # linux-aarch64 (Jetson): pytorch's profile builds it without magma (no Tegra packages exist)
    jetson = verify_package(torch_package(kernel, tmp_path / "jetson", WITHOUT_MAGMA, subdir="linux-aarch64"))
    assert not any("magma" in e for e in jetson.errors), jetson.errors

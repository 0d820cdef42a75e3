"""End to end, offline: the libtorch package shape, built through the libtorch family's recipe.

The real libtorch takes hours to compile, so `condapipe build libtorch --source DIR` builds a
stand-in C++ project (tests/data/libtorch-standin: same CMake options and install shape) with
the very recipe `condapipe render libtorch` writes for PyTorch: spec -> render -> rattler-build
(machine gcc/cmake/ninja) -> fix -> verify -> the recipe's own find_package(Torch) test ->
channel. The package is then installed with py-rattler into a fresh prefix elsewhere, and a C++
user's CMake project finds it with find_package(Torch), links it and runs.

With nvcc on PATH, a CUDA 13.0 libtorch is built the same way: its libtorch_cuda.so holds exactly
the archs of --arch (checked by condapipe verify), and the magma prerequisite is skipped because
the channel already has magma-cuda130.

The recipe's build/host/run requirements (cmake, ninja, python, pyyaml, typing_extensions,
openblas; for CUDA also magma-cuda130 and cuda-version) are conda packages that cannot be
downloaded here; they are published into the channel as empty stand-in packages (the machine's
tools do the work, as in the other e2e tests).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import lief
import pytest
from conda_package_handling import api as cph
from e2e_helpers import build_json, fixed_once, install, run_clean
from libtorch_standin_helpers import (
    CUDA_ARCHS,
    CUDA_SETTINGS,
    SETTINGS,
    STANDIN,
    TEST_PROJECT,
    recipe_dependencies,
    standin_tree,
    stub_package,
)

from condapipe.facts.arch import parse_arch_list
from condapipe.package.channel_index import index_channel
from condapipe.verify.verifier import verify_package

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("cmake", "ninja", "g++")), reason="needs cmake, ninja and g++"
    ),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("libtorch-project")
    names = recipe_dependencies(SETTINGS)
    if shutil.which("nvcc"):
        # magma-cuda130 in the channel also means the plan does not build magma first.
        names |= recipe_dependencies(CUDA_SETTINGS)
    for name in sorted(names):
        stub_package(root / "channel", name)
    index_channel(root / "channel")
    return root


@pytest.fixture(scope="module")
def built(project: Path) -> dict:
    # --force: doctor's disk estimate is the real tree's 6 GiB; the stand-in needs MBs
    return build_json(
        "libtorch", "--version", "2.4.1", "--cuda", "cpu", "--blas", "openblas", "--source", str(STANDIN),
        "--engine", "rattler-build", "--force", cwd=project,
    )  # fmt: skip


@pytest.fixture(scope="module")
def package(project: Path, built: dict) -> Path:
    (pkg,) = map(Path, built["packages"])
    return project / pkg


@pytest.fixture(scope="module")
def installed(project: Path, built: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("libtorch-elsewhere") / "env"
    install(project / "channel", ["libtorch"], prefix, tmp_path_factory.mktemp("cache"))
    return prefix


def _files(pkg: Path, dest: Path) -> set[str]:
    cph.extract(str(pkg), dest_dir=str(dest))
    return {p["_path"] for p in json.loads((dest / "info" / "paths.json").read_text())["paths"]}


def test_the_libtorch_recipe_builds_the_package_shape_cpp_users_need(
    package: Path, built: dict, tmp_path: Path
) -> None:
    assert (built["engine"], built["mode"]) == ("rattler-build", "family")
    assert package.name.startswith("libtorch-2.4.1-cpu_0")
    files = _files(package, tmp_path / "x")
    assert {
        "lib/libtorch.so",
        "lib/libc10.so",
        "include/torch/torch.h",
        "share/cmake/Torch/TorchConfig.cmake",
        "share/cmake/Torch/TorchConfigVersion.cmake",
    } <= files
    # A C++ library: nothing for Python.
    assert not [f for f in files if "site-packages" in f or f.endswith(".py")]
    index = json.loads((tmp_path / "x" / "info" / "index.json").read_text())
    assert index["name"] == "libtorch" and "openblas" in index["depends"]


def test_the_recipe_passes_pytorchs_libtorch_cmake_options(package: Path, tmp_path: Path) -> None:
    _files(package, tmp_path / "x")
    recorded = tmp_path / "x" / "share" / "libtorch-standin" / "cmake-options.txt"
    options = dict(line.split("=", 1) for line in recorded.read_text().splitlines())
    assert options["BUILD_SHARED_LIBS"] == "ON"
    assert options["BUILD_PYTHON"] == "OFF" and options["BUILD_TEST"] == "OFF"
    assert options["USE_CUDA"] == "0"  # --cuda cpu
    assert options["BLAS"] == "OpenBLAS"
    assert options["GLIBCXX_USE_CXX11_ABI"] == "0"  # pytorch.yaml: 2.4 uses the pre-CXX11 ABI
    assert options["CMAKE_BUILD_TYPE"] == "Release"


def test_the_packages_own_find_package_test_ran_and_passed(built: dict) -> None:
    (details,) = built["package_details"]
    assert details["tests"].endswith("passed"), details
    log = Path(built["log"]).read_text()
    assert "libtorch package test: Torch 2.4.1" in log
    assert "torch_smoke: sum=6" in log


def test_the_elf_files_are_fixed_before_the_engine_packs_so_the_payload_is_compressed_once(
    built: dict,
) -> None:
    line, record = fixed_once(built)
    rewritten = int(line.split("): ", 1)[1].split(" of ", 1)[0]) if line else 0
    assert rewritten >= 1, line  # build.sh's last step rewrote the build's rpaths on the staged prefix
    assert record["changed"] == 0 and record["written"] in ("info-rewritten", "copied"), record


def test_libtorch_links_c10_through_a_relative_rpath(package: Path, tmp_path: Path) -> None:
    _files(package, tmp_path / "x")
    lib = lief.parse(str(tmp_path / "x" / "lib" / "libtorch.so"))
    assert "libc10.so" in lib.libraries
    rpaths = [p for e in lib.dynamic_entries if e.tag in (lief.ELF.DynamicEntry.TAG.RPATH,
              lief.ELF.DynamicEntry.TAG.RUNPATH) for p in e.paths]  # fmt: skip
    assert rpaths and all(p.startswith("$ORIGIN") for p in rpaths), rpaths


def test_installed_elsewhere_a_cmake_project_finds_links_and_runs_it(installed: Path, tmp_path: Path) -> None:
    build_dir = tmp_path / "user-build"
    argv = ["cmake", "-S", str(TEST_PROJECT), "-B", str(build_dir), "-G", "Ninja"]
    configure = subprocess.run(
        [*argv, f"-DCMAKE_PREFIX_PATH={installed}"], capture_output=True, text=True, check=False
    )
    assert configure.returncode == 0, configure.stderr
    assert f"from {installed}/share/cmake/Torch" in configure.stdout
    compiled = subprocess.run(
        ["cmake", "--build", str(build_dir)], capture_output=True, text=True, check=False
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    proc = run_clean([build_dir / "torch_smoke"])
    assert (proc.returncode, proc.stdout) == (0, "torch_smoke: sum=6\n"), proc.stderr


@pytest.fixture(scope="module")
def built_cuda(project: Path) -> dict:
    if not shutil.which("nvcc"):
        pytest.skip("needs nvcc (CUDA 13.0) on PATH")
    # --force: doctor rightly blocks a CUDA libtorch build without cuDNN; the stand-in links none.
    source = standin_tree(project / "libtorch-2.9.0", "2.9.0")  # --source must say the --version
    return build_json(
        "libtorch", "--version", "2.9.0", "--cuda", "13.0", "--arch", CUDA_ARCHS, "--blas", "openblas",
        "--source", str(source), "--force", "--engine", "rattler-build", cwd=project,
    )  # fmt: skip


def test_a_cuda_libtorch_holds_exactly_the_requested_archs_and_passes_its_test(
    project: Path, built_cuda: dict, tmp_path: Path
) -> None:
    (pkg,) = map(Path, built_cuda["packages"])
    assert pkg.name.startswith("libtorch-2.9.0-cuda13.0_cudnn")
    archs = parse_arch_list(CUDA_ARCHS, cuda="13.0")
    report = verify_package(project / pkg, archs=archs)
    assert report.ok, report.errors
    fatbin = report.to_dict()["fatbins"]["lib/libtorch_cuda.so"]
    assert (set(fatbin["sass"]), set(fatbin["ptx"])) == ({"sm_80", "sm_90"}, {"compute_90"})
    (details,) = built_cuda["package_details"]
    assert details["tests"].endswith("passed"), details
    index = json.loads(_index(project / pkg, tmp_path / "x"))
    assert "cuda-version >=13.0,<13.1" in index["depends"]
    # magma was not built first: the channel already had the package the recipe links.
    magma = [step for step in built_cuda["steps"] if "magma-cuda130" in step["id"]]
    assert magma and {step["status"] for step in magma} == {"skipped"}
    assert "not needed: magma-cuda130" in magma[0]["reason"]
    # and the magma from the channel is in the package: linked statically into the CUDA library
    assert report.static_links == {"magma": "lib/libtorch_cuda.so"}


def _index(pkg: Path, dest: Path) -> str:
    cph.extract(str(pkg), dest_dir=str(dest))
    return (dest / "info" / "index.json").read_text()

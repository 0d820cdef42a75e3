"""End to end with the REAL conda-build (26.7.1, the `real_conda` fixture): recipes built by
`condapipe build --engine conda-build`, fixed, verified, tested, published, then installed with the
real conda into a fresh environment elsewhere and run (no LD_LIBRARY_PATH: the rpath must hold).

(a) libgreet-v0: a C shared library + CLI (CMake) whose build tool, cmake, no channel here has:
    `--build-tools wheels` serves it from the local tool channel condapipe makes from the cmake
    wheel (condapipe.inputchannels.tool_channel), with --override-channels so nothing else could.
(b) libtorch: the libtorch family's own rendered meta.yaml building the libtorch-shaped stand-in
    project (tests/data/libtorch-standin); a C++ user's CMake project then finds the installed
    package with find_package(Torch), links it and runs. Its requirements that cannot be downloaded
    here (python, pyyaml, openblas, ...) are empty stand-in packages in the channel; cmake and ninja
    come from the wheel tool channel and do the real work.

cuda-smoke (CUDA, nvcc) has the same end to end in tests/engines/test_engine_conda_build.py, and the
hello-v0 C program in its several-Pythons test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conda_package_handling import api as cph
from e2e_helpers import build_json, conda_install, fixed_once, run_clean
from libtorch_standin_helpers import SETTINGS, STANDIN, TEST_PROJECT, recipe_dependencies, stub_package

from condapipe.package.channel_index import index_channel

RECIPES = Path(__file__).parent.parent / "data" / "recipes"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("gcc", "g++", "make")), reason="needs gcc, g++, make"
    ),
]


def test_a_cmake_project_builds_with_cmake_from_the_wheel_tool_channel_and_runs_installed(
    real_conda: Path, tmp_path: Path
) -> None:
    result = build_json(
        str(RECIPES / "libgreet-v0"), "--engine", "conda-build", "--build-tools", "wheels",
        "--override-channels", cwd=tmp_path,
    )  # fmt: skip
    assert (result["engine"], result["mode"]) == ("conda-build", "recipe-dir")
    (pkg,) = map(Path, result["packages"])
    assert pkg.name == "libgreet-1.2.0-0.conda"
    log = Path(result["log"]).read_text()
    tool_channel = (tmp_path / ".condapipe" / "tool-channel").resolve()
    assert f"-c {tool_channel}" in log.splitlines()[0] and "--override-channels" in log.splitlines()[0]
    # The cmake that built it is the tool channel's (build.sh refuses any other), with its version.
    (cmake_pkg,) = (tool_channel / "linux-64").glob("cmake-*.conda")
    version = cmake_pkg.name.split("-")[1]
    assert f"building with cmake version {version} from " in log
    (details,) = result["package_details"]
    assert details["tests"].endswith("passed"), details
    unpacked = tmp_path / "unpacked"
    cph.extract(str(tmp_path / pkg), dest_dir=str(unpacked))
    rendered = (unpacked / "info" / "recipe" / "meta.yaml").read_text()
    assert f"cmake {version} pypi_wheel_0" in rendered  # the build environment conda-build solved

    env = tmp_path / "elsewhere" / "env"
    conda_install(real_conda, tmp_path / "channel", ["libgreet"], env)
    proc = run_clean([env / "bin" / "greet", "conda"])
    assert (proc.returncode, proc.stdout) == (0, "hello, conda! (libgreet 1.2.0)\n"), proc.stderr
    info = (env / "share" / "libgreet" / "build-info.txt").read_text()
    assert info.splitlines()[-1] == f"installed under {env}"


@pytest.fixture
def libtorch_project(tmp_path: Path) -> Path:
    """A project whose channel has the libtorch recipe's dependencies as stand-ins, except the build
    tools the wheel tool channel serves for real."""
    # pip too: conda adds it to python's dependencies (its add_pip_as_python_dependency default).
    for name in sorted(recipe_dependencies(SETTINGS) - {"cmake", "ninja"} | {"pip"}):
        stub_package(tmp_path / "channel", name)
    index_channel(tmp_path / "channel")
    return tmp_path


def test_the_libtorch_recipe_builds_with_conda_build_and_a_cmake_user_links_the_installed_package(
    real_conda: Path, libtorch_project: Path, tmp_path: Path
) -> None:
    project = libtorch_project
    # --force: doctor's disk estimate is the real tree's 6 GiB; the stand-in needs MBs
    result = build_json(
        "libtorch", "--version", "2.4.1", "--cuda", "cpu", "--blas", "openblas", "--source", str(STANDIN),
        "--engine", "conda-build", "--build-tools", "wheels", "--override-channels", "--force", cwd=project,
    )  # fmt: skip
    assert (result["engine"], result["mode"]) == ("conda-build", "family")
    (pkg,) = map(Path, result["packages"])
    assert pkg.name == "libtorch-2.4.1-cpu_0.conda"
    (details,) = result["package_details"]
    assert details["tests"].endswith("passed"), details
    log = Path(result["log"]).read_text()
    assert "libtorch package test: Torch 2.4.1" in log  # the recipe's find_package(Torch) test
    staged, record = fixed_once(result)  # fixed before conda-build packed: compressed once
    assert "new ELF files rewritten before packing" in staged and not staged.split("): ")[1].startswith("0 ")
    assert record["changed"] == 0 and record["written"] in ("info-rewritten", "copied"), record
    unpacked = tmp_path / "unpacked"
    cph.extract(str(project / pkg), dest_dir=str(unpacked))
    index = json.loads((unpacked / "info" / "index.json").read_text())
    assert index["name"] == "libtorch" and "openblas" in " ".join(index["depends"])
    options = (unpacked / "share" / "libtorch-standin" / "cmake-options.txt").read_text().splitlines()
    assert "BUILD_PYTHON=OFF" in options and "USE_CUDA=0" in options and "BLAS=OpenBLAS" in options

    env = tmp_path / "elsewhere" / "env"
    conda_install(real_conda, project / "channel", ["libtorch"], env)
    build_dir = tmp_path / "user-build"
    configure = subprocess.run(
        ["cmake", "-S", str(TEST_PROJECT), "-B", str(build_dir), "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={env}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert configure.returncode == 0, configure.stdout + configure.stderr
    assert f"from {env}/share/cmake/Torch" in configure.stdout
    compiled = subprocess.run(
        ["cmake", "--build", str(build_dir)], capture_output=True, text=True, check=False
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    proc = run_clean([build_dir / "torch_smoke"])
    assert (proc.returncode, proc.stdout) == (0, "torch_smoke: sum=6\n"), proc.stderr

"""`condapipe render libtorch`: PyTorch's C++ library as a recipe, with no Python axis.

The recipe's build.sh is run for real with bash, cmake, ninja and g++ on the stand-in project
(tests/data/libtorch-standin, which records the options it was configured with), so the tests
see exactly which settings reach PyTorch's CMake for each spec.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from render_helpers import load_yaml, run_cli, v0_meta, v1_render, variant_combos

STANDIN = Path(__file__).parent.parent / "data" / "libtorch-standin"


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def _render(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "recipe"
    result = run_cli("render", "libtorch", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


def _names(deps: list) -> list[str]:
    return [str(d).split()[0] for d in deps or []]


def test_libtorch_has_no_python_axis_and_python_only_runs_the_code_generators(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "--version", "2.4.1", "--cuda", "12.4")
    cbc = load_yaml((recipe / "conda_build_config.yaml").read_text())
    assert "python" not in cbc
    (variant,) = variant_combos(cbc)
    meta = v0_meta(recipe, "linux-64", variant)
    (output,) = v1_render(recipe, "linux-64")
    for req in (meta["requirements"], output.recipe.to_dict()["requirements"]):
        assert {"cmake", "ninja", "python", "pyyaml"} <= set(_names(req["build"]))
        assert "python" not in _names(req.get("host")) + _names(req.get("run"))
        assert "magma-cuda124" in _names(req["host"])
        assert "pytorch-cuda" in _names(req["run"])


def test_a_python_flag_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(
        "render", "libtorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.10", "-o", "x"
    )
    assert result.exit_code == 2
    assert result.output == "error: libtorch has no Python variants: drop --python\n"


def test_in_a_mixed_matrix_only_the_cuda_variant_links_magma(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "--version", "2.4.1", "--cuda", "12.4", "--cuda", "cpu")
    cbc = load_yaml((recipe / "conda_build_config.yaml").read_text())
    hosts = {v["cuda_version"]: _names(v0_meta(recipe, "linux-64", v)["requirements"]["host"]) for v in
             variant_combos(cbc)}  # fmt: skip
    assert "magma-cuda124" in hosts["12.4"]
    assert not [n for n in hosts["cpu"] if n.startswith("magma")]
    builds = {o.recipe.to_dict()["build"]["string"] for o in v1_render(recipe, "linux-64")}
    assert builds == {"cuda12.4_cudnn9.1.0_0", "cpu_0"}


def test_the_package_test_project_travels_with_the_recipe(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "--version", "2.4.1", "--cuda", "cpu")
    assert (recipe / "cmake_test" / "CMakeLists.txt").read_text().count("find_package(Torch REQUIRED)") == 1
    assert (recipe / "cmake_test" / "main.cpp").is_file()
    meta = (recipe / "meta.yaml").read_text()
    assert "  files:\n    - cmake_test\n" in meta
    (output,) = v1_render(recipe, "linux-64")
    script_test = next(t for t in output.recipe.to_dict()["tests"] if "script" in t)
    assert script_test["files"]["recipe"] == ["cmake_test"]


def _configure_standin(tmp_path: Path, recipe: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Run the recipe's build.sh on the stand-in source; the options it recorded at configure time."""
    if not all(shutil.which(t) for t in ("cmake", "ninja", "g++")):
        pytest.skip("needs cmake, ninja and g++")
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    src = tmp_path / "src"
    shutil.copytree(STANDIN, src)
    prefix = tmp_path / "prefix"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PREFIX": str(prefix),
        "SRC_DIR": str(src),
        "PYTHON": sys.executable,
        "MAX_JOBS": "2",
        "CONDAPIPE_CUDNN": "system",
        **variant,
        **(extra or {}),
        # These tests look at the options that reach CMake; the e2e test compiles the CUDA part.
        "CMAKE_ARGS": " ".join(["-DSTANDIN_CUDA_SOURCES=OFF", (extra or {}).get("CMAKE_ARGS", "")]),
    }
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")], cwd=src, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (prefix / "share" / "cmake" / "Torch" / "TorchConfig.cmake").is_file()
    recorded = (prefix / "share" / "libtorch-standin" / "cmake-options.txt").read_text()
    return dict(line.split("=", 1) for line in recorded.splitlines())


def test_a_cuda_build_configures_pytorchs_cmake_for_cuda_and_magma(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "--version", "2.4.1", "--cuda", "12.4", "--arch", "8.0;9.0+PTX")
    options = _configure_standin(tmp_path, recipe)
    assert options["USE_CUDA"] == "1"
    assert options["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0+PTX"
    assert options["USE_MAGMA"] == "ON" and options["USE_NCCL"] == "ON"  # PyTorch's defaults
    assert (options["BLAS"], options["BUILD_SHARED_LIBS"], options["BUILD_PYTHON"]) == ("MKL", "ON", "OFF")


def test_a_jetson_build_turns_off_nccl_and_magma(tmp_path: Path) -> None:
    cuda_home = tmp_path / "cuda"
    (cuda_home / "bin").mkdir(parents=True)
    nvcc = cuda_home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    include = tmp_path / "include"
    include.mkdir()
    (include / "cudnn.h").write_text("/* JetPack cuDNN */\n")
    recipe = _render(tmp_path, "--jetson", "xavier", "--env", f"CUDA_HOME={cuda_home}",
                     "--env", f"CUDNN_INCLUDE_DIR={include}")  # fmt: skip
    options = _configure_standin(tmp_path, recipe)
    assert (options["USE_NCCL"], options["USE_MAGMA"], options["BLAS"]) == ("0", "OFF", "OpenBLAS")
    assert options["TORCH_CUDA_ARCH_LIST"] == "7.2"


def test_the_users_cmake_args_come_last_and_win(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "--version", "2.4.1", "--cuda", "cpu", "--blas", "openblas")
    options = _configure_standin(tmp_path, recipe, {"CMAKE_ARGS": "-DBUILD_TEST=ON -DUSE_NCCL=OFF"})
    assert (options["BUILD_TEST"], options["USE_NCCL"], options["USE_CUDA"]) == ("ON", "OFF", "0")


def test_a_test_file_missing_from_the_recipe_is_refused(tmp_path: Path) -> None:
    """Test files travel in the recipe dir; naming one that is not there would fail only at test time."""
    from dataclasses import replace

    from condapipe.buildspec.build_spec import build_spec
    from condapipe.errors import UsageError
    from condapipe.render.families.libtorch import build_model
    from condapipe.render.recipe_dir import render_model

    model = build_model(build_spec("libtorch", {"version": "2.4.1", "cuda": ["cpu"]}))
    broken = replace(model, tests=replace(model.tests, files=("cmake_tests",)))
    with pytest.raises(UsageError, match="test file 'cmake_tests' is not a file of the recipe"):
        render_model(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()

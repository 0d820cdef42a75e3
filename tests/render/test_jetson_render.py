"""Jetson recipes, rendered on this x86_64 machine for linux-aarch64, in both formats.

What a Jetson build needs and users get wrong by hand: OpenBLAS (no MKL), no magma, no NCCL, the
CUDA toolkit and cuDNN from JetPack on the board (no CUDA runtime package), the board's arch,
and for PyTorch 1.x on TX2-era JetPack the CUDA_NUM_THREADS 512 patch. build.sh is run for real
(up to PyTorch's setup.py, replaced by a recorder) to see the environment setup.py would get.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from render_helpers import load_yaml, run_cli, v0_meta, v1_render, variant_combos

RECORDER = """\
import json, os, sys
with open(os.environ["RECORD_TO"], "w") as fh:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, fh)
"""
CUDA_RUN_PACKAGES = ("cudatoolkit", "pytorch-cuda", "cuda-version")


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def _render(tmp_path: Path, *args: str, name: str = "recipe") -> Path:
    out = tmp_path / name
    result = run_cli("render", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


def _names(deps: list) -> list[str]:
    return [str(d).split()[0] for d in deps or []]


@pytest.mark.parametrize("board", ["tx2", "orin"])
def test_both_formats_render_for_aarch64_without_mkl_magma_or_cuda_packages(
    board: str, tmp_path: Path
) -> None:
    recipe = _render(tmp_path, "pytorch", "--jetson", board)
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    meta = v0_meta(recipe, "linux-aarch64", variant)
    (output,) = v1_render(recipe, "linux-aarch64")
    v1 = output.recipe.to_dict()
    for req in (meta["requirements"], v1["requirements"]):
        host, run = _names(req["host"]), _names(req["run"])
        assert "openblas" in host
        assert not [n for n in host + run if n.startswith(("mkl", "magma"))]
        assert not [n for n in run if n in CUDA_RUN_PACKAGES]
    assert meta["build"]["string"] == v1["build"]["string"]
    assert meta["build"]["string"].endswith(f"_{board}_0")
    # JetPack's libraries are linked but not shipped: both tools must accept them.
    assert "*/libcudnn*.so*" in meta["build"]["missing_dso_whitelist"]
    assert "*/libcudnn*.so*" in v1["build"]["dynamic_linking"]["missing_dso_allowlist"]


@pytest.mark.parametrize(
    ("args", "patched"),
    [
        (("--jetson", "tx2"), True),  # 1.10 on JetPack 4.6 (CUDA 10.2)
        (("--jetson", "nano", "--version", "1.8.0"), True),
        # Xavier allows 64K registers per block: same JetPack and PyTorch, no patch.
        (("--jetson", "xavier", "--cuda", "10.2", "--version", "1.10.0", "--python", "3.8"), False),
        (("--jetson", "xavier"), False),  # 2.0 on JetPack 5.1 (CUDA 11.4)
        (("--jetson", "orin"), False),
    ],
)
def test_the_cuda_num_threads_patch_goes_to_tx1_tx2_era_boards_on_1x(
    args: tuple[str, ...], patched: bool, tmp_path: Path
) -> None:
    recipe = _render(tmp_path, "pytorch", *args)
    patch = "cuda-num-threads-512-jetson.patch"
    assert (recipe / patch).is_file() == patched
    meta_text = (recipe / "meta.yaml").read_text()
    recipe_text = (recipe / "recipe.yaml").read_text()
    assert (patch in meta_text, patch in recipe_text) == (patched, patched)


def _fake_jetpack(root: Path, *, cudnn_headers: bool) -> tuple[Path, Path]:
    """A CUDA_HOME with an executable bin/nvcc and a cuDNN include dir, as JetPack lays them out."""
    cuda_home = root / "cuda"
    (cuda_home / "bin").mkdir(parents=True)
    nvcc = cuda_home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    include = root / "include"
    include.mkdir()
    if cudnn_headers:
        (include / "cudnn_version.h").write_text("#define CUDNN_MAJOR 9\n")
    return cuda_home, include


def _run_build_sh(tmp_path: Path, recipe: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    src = tmp_path / "src"
    src.mkdir()
    (src / "setup.py").write_text(RECORDER)
    record = tmp_path / "record.json"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    env = {
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "PREFIX": str(tmp_path / "prefix"),
        "PYTHON": sys.executable,
        "PKG_VERSION": "2.5.0",
        "PKG_BUILDNUM": "0",
        "RECORD_TO": str(record),
        **{k: v for k, v in variant.items() if k != "python"},
    }
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")], cwd=src, env=env, capture_output=True, text=True, check=False
    )
    return proc, (json.loads(record.read_text()) if record.exists() else {})


def test_build_sh_gives_setup_py_the_jetson_settings(tmp_path: Path) -> None:
    cuda_home, include = _fake_jetpack(tmp_path, cudnn_headers=True)
    recipe = _render(
        tmp_path, "pytorch", "--jetson", "orin", "--env", f"CUDA_HOME={cuda_home}",
        "--env", f"CUDNN_INCLUDE_DIR={include}",
    )  # fmt: skip
    proc, record = _run_build_sh(tmp_path, recipe)
    assert proc.returncode == 0, proc.stderr
    env = record["env"]
    assert env["USE_CUDA"] == "1" and env["TORCH_CUDA_ARCH_LIST"] == "8.7"
    assert (env["USE_NCCL"], env["USE_MAGMA"], env["BLAS"]) == ("0", "0", "OpenBLAS")
    assert env["CUDNN_INCLUDE_DIR"] == str(include)
    assert env["CUDNN_LIB_DIR"] == "/usr/lib/aarch64-linux-gnu"
    assert env["USE_STATIC_CUDNN"] == "0"  # JetPack's cuDNN is linked dynamically
    assert env["CUDA_VERSION"] == "12.6" and env["CUDNN_VERSION"] == "9.3.0"
    assert env["PATH"].split(os.pathsep)[0] == f"{cuda_home}/bin"


def test_build_sh_stops_before_compiling_when_jetpacks_cudnn_is_missing(tmp_path: Path) -> None:
    cuda_home, include = _fake_jetpack(tmp_path, cudnn_headers=False)
    recipe = _render(
        tmp_path, "pytorch", "--jetson", "orin", "--env", f"CUDA_HOME={cuda_home}",
        "--env", f"CUDNN_INCLUDE_DIR={include}",
    )  # fmt: skip
    proc, record = _run_build_sh(tmp_path, recipe)
    assert proc.returncode == 1
    assert record == {}  # setup.py never ran
    assert f"no cuDNN headers in {include}" in proc.stderr and "libcudnn9-dev" in proc.stderr


def test_build_sh_stops_when_jetpacks_nvcc_is_missing(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "pytorch", "--jetson", "orin", "--env", f"CUDA_HOME={tmp_path / 'nowhere'}")
    proc, record = _run_build_sh(tmp_path, recipe)
    assert proc.returncode == 1 and record == {}
    assert f"no nvcc in {tmp_path / 'nowhere'}/bin" in proc.stderr


def test_an_aarch64_server_build_has_no_magma_but_keeps_its_cuda_package(tmp_path: Path) -> None:
    """linux-aarch64 without --jetson (Grace, SBSA): CUDA comes from packages, magma does not exist."""
    recipe = _render(
        tmp_path, "pytorch", "--platform", "linux-aarch64", "--version", "2.6.0", "--cuda", "12.6",
        "--python", "3.12",
    )  # fmt: skip
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    meta = v0_meta(recipe, "linux-aarch64", variant)
    assert not [n for n in _names(meta["requirements"]["host"]) if n.startswith("magma")]
    assert "cuda-version" in _names(meta["requirements"]["run"])
    build_sh = (recipe / "build.sh").read_text()
    assert 'export USE_MAGMA="0"' in build_sh
    assert "CUDA_HOME" not in build_sh
    assert "USE_NCCL" not in build_sh  # NCCL works on aarch64 servers; only Jetson boards lack it

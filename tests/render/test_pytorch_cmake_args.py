"""CMake options a user gives in CMAKE_ARGS reach PyTorch's CMake, the way setup.py passes them on.

PyTorch's setup.py never reads CMAKE_ARGS (it becomes a dead -DCMAKE_ARGS cache entry) and no
release reads EXTRA_CAFFE2_CMAKE_FLAGS: what reaches CMake is environment variables setup.py
forwards (names starting BUILD_, USE_, CMAKE_, and a fixed list). The rendered build.sh turns each
-DNAME=VALUE of CMAKE_ARGS into such a variable. Here the rendered script runs unchanged up to its
build command (`python setup.py install`, or pip for 2.6+), where a recorder stands in for setup.py
and writes the environment it got; the real setup.py's forwarding is exercised on real trees by
tests/render/test_pytorch_real_tree_upstream.py (`pytest -m upstream`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from render_helpers import run_cli

# Stands in for `python setup.py install` (1.x) and `python -m pip install .` (2.6+): the build
# command of each series, where setup.py would read the environment.
RECORDER = """#!/usr/bin/env bash
if [[ "$1" == "setup.py" || "$1 $2 $3" == "-m pip install" ]]; then env > "${RECORD_TO}"; exit 0; fi
exec python3 "$@"
"""


def run_build_sh(tmp_path: Path, version: str, cmake_args: str) -> tuple[dict[str, str], str]:
    out = tmp_path / "recipe"
    result = run_cli(
        "render", "pytorch", "--version", version, "--cuda", "cpu", "--python", "3.10", "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").write_text(RECORDER)
    (shim / "python").chmod(0o755)
    record = tmp_path / "env.txt"
    env = {
        "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
        "RECORD_TO": str(record),
        "PREFIX": str(tmp_path / "prefix"),
        "PYTHON": shutil.which("python3") or "python3",
        "PKG_VERSION": version,
        "PKG_NAME": "pytorch",
        "SRC_DIR": str(tmp_path),
        "cuda_version": "cpu",
        "build_tag": "cpu",
        "CMAKE_ARGS": cmake_args,
    }
    proc = subprocess.run(
        ["bash", str(out / "build.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    pairs = (line.partition("=") for line in record.read_text().splitlines() if "=" in line)
    return {name: value for name, _, value in pairs}, proc.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("version", ["1.13.1", "2.6.0"])
def test_cmake_args_reach_setup_py_as_the_variables_it_forwards(tmp_path: Path, version: str) -> None:
    env, stderr = run_build_sh(
        tmp_path,
        version,
        "-DUSE_FBGEMM=OFF -DCMAKE_BUILD_TYPE:STRING=RelWithDebInfo -DBUILD_CAFFE2=0 "
        "-DCMAKE_INSTALL_PREFIX=/somewhere -DWERROR=1 -DSOME_UNKNOWN=1",
    )
    assert env["USE_FBGEMM"] == "OFF"
    assert env["CMAKE_BUILD_TYPE"] == "RelWithDebInfo"  # the :TYPE is CMake's, not part of the value
    assert env["BUILD_CAFFE2"] == "0" and env["WERROR"] == "1"
    # setup.py refuses CMAKE_INSTALL_PREFIX in the environment: it installs into the tree itself.
    assert "CMAKE_INSTALL_PREFIX" not in env
    # a name setup.py would not pass on is said, not silently lost; CMAKE_ARGS itself is not left
    # for setup.py to turn into a dead cache entry
    assert "SOME_UNKNOWN" not in env and "-DSOME_UNKNOWN" in stderr
    assert "CMAKE_ARGS" not in env


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_value_is_never_run_as_code(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    env, _ = run_build_sh(tmp_path, "2.6.0", f"-DUSE_X=$(touch${{IFS}}{marker}) -DUSE_Y=`touch {marker}`")
    assert not marker.exists()
    assert env["USE_X"] == f"$(touch${{IFS}}{marker})"


def test_no_recipe_passes_extra_caffe2_cmake_flags(tmp_path: Path) -> None:
    for version in ("1.13.1", "2.6.0"):
        out = tmp_path / version
        result = run_cli(
            "render", "pytorch", "--version", version, "--cuda", "cpu", "--python", "3.10", "-o", str(out)
        )
        assert result.exit_code == 0, result.output
        for name in ("meta.yaml", "recipe.yaml", "build.sh"):
            assert "EXTRA_CAFFE2_CMAKE_FLAGS" not in (out / name).read_text().replace(
                "no release reads\n# EXTRA_CAFFE2_CMAKE_FLAGS", ""
            ).replace("no release reads EXTRA_CAFFE2_CMAKE_FLAGS", "")

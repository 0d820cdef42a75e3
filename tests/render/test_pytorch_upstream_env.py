"""Opt-in (`pytest -m upstream`): the pytorch recipe's knobs against the real upstream files.

The torch wheels on PyPI carry share/cmake/Caffe2 (FindCUDNN.cmake, public/cuda.cmake, ...) and
torch/utils/*.py exactly as tagged; one wheel per series of pytorch.yaml (the newest release PyPI
has, the small linux-aarch64 CPU wheel first: it carries the same CMake files) is enough to check:

- every build_env entry whose reader is wheel-cmake / wheel-python is really read there;
- no release reads CUDNN_LIBRARY_PATH from the environment (the knob build.sh once exported);
- the rendered build.sh, run up to its build command with the real nvidia-cudnn-cu12 wheel in the
  host Python, makes the release's real FindCUDNN.cmake find cuDNN (CUDNN_FOUND=TRUE), where
  the old environment (CUDNN_LIBRARY_PATH) leaves it FALSE.

Recorded (2026-11-23, cmake 3.25, torch wheels 1.8.1 ... 2.15.0, nvidia-cudnn-cu12 9.1.0.70): every
series' FindCUDNN.cmake finds cuDNN 9.1.0 with build.sh's environment; the old one finds nothing.
Cache: $CONDAPIPE_UPSTREAM_CACHE (default ~/.cache/condapipe-upstream), as test_patches_upstream.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest
from packaging.version import Version
from render_helpers import load_yaml, run_cli, variant_combos

from condapipe.facts import tables

pytestmark = [
    pytest.mark.upstream,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake"),
]

CACHE = Path(os.environ.get("CONDAPIPE_UPSTREAM_CACHE", Path.home() / ".cache" / "condapipe-upstream"))
# Small wheels that carry share/cmake and torch/utils, tried in order (aarch64 = CPU builds).
WHEEL_TARGETS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_17_aarch64"), ""),
    (("macosx_11_0_arm64",), ""),
    (("macosx_10_9_x86_64",), ""),
)
CUDNN_WHEEL = ("nvidia-cudnn-cu12", "9.1.0.70")  # what torch 2.4.1's wheel requires
FORWARDED = ("USE_", "BUILD_", "CMAKE_")  # setup.py passes these as -DNAME: CMake reads the name


def series_list() -> list[tables.PytorchInfo]:
    seen: dict[str, tables.PytorchInfo] = {}
    for version in tables.pytorch_versions():
        info = tables.pytorch_info(version)
        seen.setdefault(info.series, info)
    return list(seen.values())


def _pip_download(spec: str, folder: Path, platforms: tuple[str, ...], python: str) -> bool:
    argv = [sys.executable, "-m", "pip", "download", spec, "--no-deps", "--only-binary=:all:",
            "--python-version", python, "-d", str(folder), "-q"]  # fmt: skip
    for platform in platforms:
        argv += ["--platform", platform]
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


@cache
def torch_wheel(series: str) -> Path:
    """The newest release of `series` PyPI has a small wheel for."""
    info = next(s for s in series_list() if s.series == series)
    for version in sorted(info.versions, key=Version, reverse=True):
        folder = CACHE / "wheels" / version
        found = sorted(folder.glob("torch-*.whl"))
        if found:
            return found[0]
        folder.mkdir(parents=True, exist_ok=True)
        for platforms, _ in WHEEL_TARGETS:
            for python in info.pythons:
                if _pip_download(f"torch=={version}", folder, platforms, python):
                    return next(folder.glob("torch-*.whl"))
    pytest.fail(f"no small torch wheel of series {series} on PyPI")


@cache
def wheel_files(series: str) -> dict[str, str]:
    """share/cmake and torch/utils text files of the series' wheel: path -> text."""
    out = {}
    with zipfile.ZipFile(torch_wheel(series)) as whl:
        for name in whl.namelist():
            if (name.startswith("torch/share/cmake/") and name.endswith(".cmake")) or (
                name.startswith("torch/utils/") and name.endswith(".py")
            ):
                out[name] = whl.read(name).decode("utf-8", "replace")
    return out


def cmake_reads(name: str, files: dict[str, str]) -> list[str]:
    pattern = re.escape(f"$ENV{{{name}}}")
    if name.startswith(FORWARDED):
        pattern = rf"\b{re.escape(name)}\b"
    return [p for p, text in files.items() if p.endswith(".cmake") and re.search(pattern, text)]


def python_reads(name: str, files: dict[str, str]) -> list[str]:
    q = re.escape(name)
    pattern = rf"""(environ(\.get)?\s*[\[(]\s*['"]{q}['"]|getenv\(\s*['"]{q}['"])"""
    return [p for p, text in files.items() if p.endswith(".py") and re.search(pattern, text)]


SERIES = [s.series for s in series_list()]


@pytest.mark.parametrize("series", SERIES)
def test_the_wheel_reads_every_variable_data_says_it_reads(series: str) -> None:
    files = wheel_files(series)
    missing = []
    for entry in tables.build_env_evidence().values():
        if entry.since and Version(series) < Version(entry.since):
            continue
        if entry.reader == "wheel-cmake" and not cmake_reads(entry.name, files):
            missing.append(f"{entry.name} (no CMake file of the wheel reads it)")
        if entry.reader == "wheel-python" and not python_reads(entry.name, files):
            missing.append(f"{entry.name} (no torch/utils/*.py reads it)")
    assert not missing, f"torch {torch_wheel(series).name}: {missing}"


@pytest.mark.parametrize("series", SERIES)
def test_no_release_reads_cudnn_library_path_from_the_environment(series: str) -> None:
    files = wheel_files(series)
    assert not [p for p, t in files.items() if "$ENV{CUDNN_LIBRARY_PATH}" in t]
    assert not python_reads("CUDNN_LIBRARY_PATH", files)


# --- the cuDNN wheel through the real FindCUDNN.cmake ---------------------------------------

PROBE_CMAKE = """cmake_minimum_required(VERSION 3.18)
project(cudnn_probe NONE)
list(APPEND CMAKE_MODULE_PATH "${FIND_MODULES}")
find_package(CUDNN)
set(q "\\"")
file(WRITE "${RESULT}" "{${q}found${q}: ${q}${CUDNN_FOUND}${q}, ${q}version${q}: ${q}${CUDNN_VERSION}${q},
  ${q}library${q}: ${q}${CUDNN_LIBRARY_PATH}${q}, ${q}include${q}: ${q}${CUDNN_INCLUDE_PATH}${q}}")
"""
# Stands in for setup.py: runs CMake with the environment build.sh hands it (as setup.py does).
PROBE_SETUP = """import os, subprocess
probe = os.environ["PROBE_DIR"]
defines = ["-DFIND_MODULES=" + os.environ["FIND_MODULES"], "-DRESULT=" + os.environ["RESULT"]]
subprocess.run(["cmake", "-S", probe, "-B", probe + "/build", *defines], check=True)
"""


@cache
def cudnn_site() -> Path:
    """site-packages holding nvidia/cudnn from the real wheel (only libcudnn.so.N and headers)."""
    name, version = CUDNN_WHEEL
    folder = CACHE / "wheels" / f"{name}-{version}"
    if not list(folder.glob("nvidia_cudnn*.whl")):
        folder.mkdir(parents=True, exist_ok=True)
        assert _pip_download(f"{name}=={version}", folder, ("manylinux2014_x86_64",), "3.12"), "pip download"
    site = CACHE / "trees" / f"{name}-{version}"
    with zipfile.ZipFile(next(folder.glob("nvidia_cudnn*.whl"))) as whl:
        for member in whl.namelist():
            keep = re.fullmatch(
                r"nvidia/(__init__\.py|cudnn/__init__\.py|cudnn/include/.*|cudnn/lib/libcudnn\.so\.\d+)",
                member,
            )
            if keep and not (site / member).exists():
                (site / member).parent.mkdir(parents=True, exist_ok=True)
                (site / member).write_bytes(whl.read(member))
    return site


def find_modules(series: str, root: Path) -> Path:
    """The wheel's Modules_CUDA_fix folder (FindCUDNN.cmake) unpacked under root."""
    out = root / f"modules-{series}"
    for path, text in wheel_files(series).items():
        if "/Modules_CUDA_fix/" in path:
            dst = out / path.split("/Modules_CUDA_fix/", 1)[1]
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(text)
    assert (out / "FindCUDNN.cmake").is_file()
    return out


def run_build_sh(tmp_path: Path, series: str, extra_env: dict[str, str]) -> dict:
    """Render pytorch (newest release of the series, its newest CUDA) and run build.sh, whose
    build command reaches the probe instead of PyTorch's setup.py."""
    info = next(s for s in series_list() if s.series == series)
    recipe = tmp_path / "recipe"
    cuda = info.cudas[-1]
    result = run_cli("render", "pytorch", "--version", info.versions[-1], "--cuda", cuda,
                     "--python", info.pythons[-1], "-o", str(recipe))  # fmt: skip
    assert result.exit_code == 0, result.output
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    src, probe, bindir = tmp_path / "src", tmp_path / "probe", tmp_path / "bin"
    for d in (src, probe, bindir):
        d.mkdir()
    (src / "setup.py").write_text(PROBE_SETUP)
    (src / "pyproject.toml").write_text('[project]\nname = "probe"\nversion = "0"\n')
    (probe / "CMakeLists.txt").write_text(PROBE_CMAKE)
    (bindir / "python").symlink_to(sys.executable)
    fake_pip = bindir / "pip"  # `python -m pip install .` (2.6+) -> the probe as well
    fake_pip.write_text(f"#!/bin/sh\nexec {sys.executable} {src / 'setup.py'}\n")
    fake_pip.chmod(0o755)
    result_file = tmp_path / "result.json"
    env = {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "PREFIX": str(tmp_path / "prefix"),
        "SRC_DIR": str(src),
        "PYTHON": sys.executable,
        "PKG_NAME": "pytorch",
        "PKG_VERSION": info.versions[-1],
        "PKG_BUILDNUM": "0",
        "PROBE_DIR": str(probe),
        "FIND_MODULES": str(find_modules(series, tmp_path)),
        "RESULT": str(result_file),
        **{k: v for k, v in variant.items() if k != "python"},
        **extra_env,
    }
    body = (recipe / "build.sh").read_text().replace("python -m pip install", "python setup.py #")
    script = tmp_path / "build.sh"
    script.write_text(body)
    proc = subprocess.run(
        ["bash", str(script)], cwd=src, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {**json.loads(result_file.read_text()), "log": proc.stdout}


@pytest.mark.parametrize("series", SERIES)
def test_build_sh_makes_the_real_findcudnn_find_the_pip_cudnn_wheel(series: str, tmp_path: Path) -> None:
    site = cudnn_site()
    found = run_build_sh(tmp_path, series, {"PYTHONPATH": str(site), "CONDAPIPE_CUDNN": "wheel"})
    assert found["found"] == "TRUE", found
    # FindCUDNN.cmake reads the version from cudnn_version.h since 2.0 (before: public/cuda.cmake).
    assert found["version"] == ("9.1.0" if Version(series) >= Version("2.0") else "")
    assert Path(found["library"]).resolve() == (site / "nvidia/cudnn/lib/libcudnn.so.9").resolve()
    assert Path(found["include"]) == site / "nvidia/cudnn/include"


def test_the_old_environment_left_cudnn_not_found_with_the_real_2_4_1_findcudnn(tmp_path: Path) -> None:
    """What build.sh exported before: CUDNN_INCLUDE_DIR + CUDNN_LIBRARY_PATH (read by nobody)."""
    site = cudnn_site()
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "CMakeLists.txt").write_text(PROBE_CMAKE)
    result = tmp_path / "result.json"
    env = dict(os.environ, CUDNN_INCLUDE_DIR=str(site / "nvidia/cudnn/include"),
               CUDNN_LIBRARY_PATH=str(site / "nvidia/cudnn/lib/libcudnn.so.9"))  # fmt: skip
    subprocess.run(
        ["cmake", "-S", str(probe), "-B", str(probe / "build"),
         f"-DFIND_MODULES={find_modules('2.4', tmp_path)}", f"-DRESULT={result}"],
        env=env, capture_output=True, check=True,
    )  # fmt: skip
    assert json.loads(result.read_text())["found"] == "FALSE"

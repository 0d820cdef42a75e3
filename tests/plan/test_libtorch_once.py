"""libtorch once, many Pythons: with CONDAPIPE_COMPILE_CACHE, the pytorch recipe's Python variants
share one compile of the C++ core and compile only their Python bindings.

The rendered build.sh runs for real (bash, cmake, ninja, g++, ccache) once per Python variant,
each in its own build root with its own host prefix, exactly as conda-build and rattler-build lay
variant builds out, on a stand-in with PyTorch's build shape (tests/data/pytorch-standin: a C++
core plus a binding module built against the host Python's headers).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from render_helpers import load_yaml, run_cli, variant_combos

STANDIN = Path(__file__).parent.parent / "data" / "pytorch-standin"
CORE_OBJECTS = len(list((STANDIN / "core").glob("*.cpp")))
PYTHONS = ("3.10", "3.11")

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cmake", "ninja", "g++", "ccache")),
    reason="needs cmake, ninja, g++ and ccache (Debian package ccache)",
)


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    out = tmp_path / "recipe"
    args = ["--version", "2.4.1", "--cuda", "cpu", *(a for py in PYTHONS for a in ("--python", py))]
    result = run_cli("render", "pytorch", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


def _variants(recipe: Path) -> dict[str, dict[str, str]]:
    combos = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))
    return {v["python"]: v for v in combos}


def _build_variant(
    tmp_path: Path, recipe: Path, variant: dict[str, str], cache: Path | None, path: str | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One variant build as the tools lay it out: <root>/work (source) and <root>/host_env_... ."""
    py = variant["python"]
    root = tmp_path / f"bld-py{py}"
    src = root / "work"
    shutil.copytree(STANDIN, src)
    prefix = root / "host_env_placehold_placehold"
    include = prefix / "include" / f"python{py}"
    include.mkdir(parents=True)
    (include / "Python.h").write_text(f'#define PY_VERSION "{py}.9"\n')
    bindir = root / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    env = {
        "PATH": path or f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "SRC_DIR": str(src),
        "PREFIX": str(prefix),
        "PYTHON": sys.executable,
        "PKG_NAME": "pytorch",
        "PKG_VERSION": "2.4.1",
        "PKG_BUILDNUM": "0",
        "MAX_JOBS": "2",
        **({"CONDAPIPE_COMPILE_CACHE": str(cache)} if cache else {}),
        **{k: v for k, v in variant.items() if k != "python"},
    }
    proc = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(recipe / "build.sh")],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc, prefix


def _stats(stdout: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+_hit|cache_miss)\s+(\d+)$", stdout, re.MULTILINE)}


def test_the_second_python_reuses_the_core_and_compiles_only_its_bindings(
    tmp_path: Path, recipe: Path
) -> None:
    cache = tmp_path / "compile-cache"
    variants = _variants(recipe)
    first, prefix1 = _build_variant(tmp_path, recipe, variants["3.10"], cache)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    compiled = _stats(first.stdout)["cache_miss"]  # everything compiled once (+ CMake's own probes)
    assert compiled >= CORE_OBJECTS + 1
    second, prefix2 = _build_variant(tmp_path, recipe, variants["3.11"], cache)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    stats = _stats(second.stdout)
    assert stats["cache_miss"] == 1  # the binding module, built against Python 3.11's headers
    assert stats["direct_cache_hit"] + stats["preprocessed_cache_hit"] == compiled - 1
    # The core library is the same build; each Python got its own bindings.
    lib = Path("lib") / "libtorch_standin.so"
    assert (prefix1 / lib).read_bytes() == (prefix2 / lib).read_bytes()
    for prefix, py in ((prefix1, "3.10"), (prefix2, "3.11")):
        module = prefix / "lib" / f"python{py}" / "site-packages" / "torch_standin" / "_C.so"
        assert f"{py}.9".encode() in module.read_bytes()
    assert f"compile cache {cache}/pytorch-2.4.1-cpu" in second.stdout


def test_without_the_setting_nothing_is_cached(tmp_path: Path, recipe: Path) -> None:
    proc, _ = _build_variant(tmp_path, recipe, _variants(recipe)["3.10"], None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compile cache" not in proc.stdout and not _stats(proc.stdout)


def test_the_setting_without_ccache_stops_before_compiling(tmp_path: Path, recipe: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("dirname", "awk", "getconf", "grep", "mkdir", "cmake"):
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    proc, prefix = _build_variant(
        tmp_path, recipe, _variants(recipe)["3.10"], tmp_path / "cache", path=str(tools)
    )
    assert proc.returncode == 1
    assert "CONDAPIPE_COMPILE_CACHE is set but ccache is not on PATH" in proc.stderr
    assert not (prefix / "lib").exists()

#!/usr/bin/env python3
"""Benchmark: "libtorch once, many Pythons" (CONDAPIPE_COMPILE_CACHE) against one full compile per
Python, on the pytorch stand-in (tests/data/pytorch-standin) with a generated, bigger C++ core.

The rendered pytorch build.sh runs for real (bash, cmake, ninja, g++, ccache) once per Python
variant, each in its own build root and host prefix as conda-build / rattler-build lay variant
builds out: first without the cache (every Python compiles everything), then with one cache
shared by the variants. Prints wall time per variant build and the totals. Not a test.

    python bench/libtorch_once_bench.py                    # 3 Pythons, 24 core files (~10 min, 2 cores)
    python bench/libtorch_once_bench.py --core-files 8 --pythons 3.10,3.11   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "tests" / "data" / "pytorch-standin"

KERNEL = """\
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

namespace {{
template <typename T, int K>
T kernel(std::size_t n) {{
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), T(K));
  std::map<std::string, std::vector<T>> m;
  for (std::size_t i = 0; i < n; ++i) m[std::to_string(i % (K + 3))].push_back(v[i]);
  T total = 0;
  for (auto& [key, values] : m) {{
    std::sort(values.begin(), values.end(), std::greater<T>());
    total += std::accumulate(values.begin(), values.end(), T(0));
  }}
  return total;
}}
template <int... Ks>
double all(std::size_t n) {{
  return (0.0 + ... + (kernel<double, Ks>(n) + kernel<float, Ks>(n) + kernel<long, Ks>(n)));
}}
}}  // namespace

double generated_kernel_{i}(std::size_t n) {{ return all<{ks}>(n); }}
"""


def _generate_core(dest: Path, count: int) -> list[str]:
    """`count` template-heavy translation units (the stand-in's libtorch core)."""
    dest.mkdir(parents=True)
    files = []
    for i in range(count):
        path = dest / f"generated_{i}.cpp"
        path.write_text(KERNEL.format(i=i, ks=", ".join(str(k) for k in range(i % 5, i % 5 + 12))))
        files.append(str(path))
    return files


def _render(out: Path, pythons: list[str]) -> Path:
    args = ["render", "pytorch", "--version", "2.4.1", "--cuda", "cpu", "-o", str(out)]
    for py in pythons:
        args += ["--python", py]
    cli = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
    subprocess.run([*cli, *args], check=True, capture_output=True, cwd=out.parent)
    return out


def _variant_env(recipe: Path) -> dict[str, str]:
    from ruamel.yaml import YAML

    cbc = YAML(typ="safe").load((recipe / "conda_build_config.yaml").read_text())
    return {k: str(v[0]) for k, v in cbc.items() if k not in ("zip_keys", "python")}


def _build(root: Path, recipe: Path, py: str, core: list[str], cache: Path | None) -> float:
    src = root / "work"
    shutil.copytree(STANDIN, src)
    prefix = root / "host_env_placehold_placehold"
    include = prefix / "include" / f"python{py}"
    include.mkdir(parents=True)
    (include / "Python.h").write_text(f'#define PY_VERSION "{py}.0"\n')
    bindir = root / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    # Core files live inside each work dir, as PyTorch's sources do.
    local_core = [str(src / "core" / Path(f).name) for f in core]
    for f in core:
        shutil.copy(f, src / "core")
    stock = sorted(str(p) for p in (src / "core").glob("kernel_*.cpp"))
    core_files = [*local_core, *stock, str(src / "core" / "dispatch.cpp")]
    env = {
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(root),
        "SRC_DIR": str(src),
        "PREFIX": str(prefix),
        "PYTHON": sys.executable,
        "PKG_NAME": "pytorch",
        "PKG_VERSION": "2.4.1",
        "PKG_BUILDNUM": "0",
        "MAX_JOBS": str(os.cpu_count() or 1),
        "CORE_FILES": ";".join(core_files),
        **({"CONDAPIPE_COMPILE_CACHE": str(cache)} if cache else {}),
        **_variant_env(recipe),
    }
    start = time.perf_counter()
    subprocess.run(["bash", str(recipe / "build.sh")], cwd=src, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core-files", type=int, default=24)
    parser.add_argument("--pythons", default="3.10,3.11,3.12")
    args = parser.parse_args()
    pythons = args.pythons.split(",")
    for tool in ("cmake", "ninja", "g++", "ccache"):
        if not shutil.which(tool):
            sys.exit(f"needs {tool} on PATH")
    with tempfile.TemporaryDirectory(prefix="libtorch-once-") as tmp:
        base = Path(tmp)
        core = _generate_core(base / "core", args.core_files)
        recipe = _render(base / "recipe", pythons)
        results: dict[str, dict[str, float]] = {"per_python_full_compile": {}, "libtorch_once": {}}
        for py in pythons:
            results["per_python_full_compile"][py] = _build(base / f"plain-{py}", recipe, py, core, None)
        cache = base / "compile-cache"
        for py in pythons:
            results["libtorch_once"][py] = _build(base / f"once-{py}", recipe, py, core, cache)
    totals = {mode: round(sum(times.values()), 1) for mode, times in results.items()}
    print(json.dumps({
        "core_files": args.core_files,
        "pythons": pythons,
        "cpus": os.cpu_count(),
        "seconds": {mode: {py: round(t, 1) for py, t in times.items()} for mode, times in results.items()},
        "total_seconds": totals,
        "saving": f"{100 * (1 - totals['libtorch_once'] / totals['per_python_full_compile']):.0f}%",
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()

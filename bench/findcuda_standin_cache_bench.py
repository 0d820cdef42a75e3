"""Cold and warm builds of the FindCUDA stand-in through a rendered magma build.sh with ccache.

tests/data/magma-findcuda-standin has magma 2.6's CMake shape (FindCUDA's cuda_add_library). Each
recipe given is built cold (an empty cache), then warm (a fresh work dir at the same path, the same
cache); compare a build.sh rendered before and after a compile-cache change.
Run: python bench/findcuda_standin_cache_bench.py RENDERED_MAGMA_RECIPE [...]
(render one with `condapipe render magma --cuda <nvcc's CUDA> --arch 9.0 -o DIR`.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

STANDIN = Path(__file__).resolve().parent.parent / "tests" / "data" / "magma-findcuda-standin"


def _variant(recipe: Path) -> dict[str, str]:
    """The recipe's one variant (magma's conda_build_config.yaml zips single values)."""
    config = yaml.safe_load((recipe / "conda_build_config.yaml").read_text())
    return {k: str(v[0]) for k, v in config.items() if k != "zip_keys"}


def _build(recipe: Path, root: Path, cache: Path, number: int) -> tuple[float, str]:
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
        "PKG_BUILDNUM": str(number),
        "MAX_JOBS": "2",
        "CONDAPIPE_COMPILE_CACHE": str(cache),
        **_variant(recipe),
    }
    start = time.perf_counter()
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")], cwd=src, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"build failed: {(proc.stdout + proc.stderr)[-2000:]}")
    found = re.search(r"^condapipe: nvcc -M dependency pass.*$", proc.stdout, re.MULTILINE)
    return seconds, found[0].removeprefix("condapipe: ") if found else "nvcc -M: not reported"


def main(recipes: list[Path]) -> None:
    for recipe in recipes:
        with tempfile.TemporaryDirectory() as tmp:
            root, cache = Path(tmp) / "bld", Path(tmp) / "cache"
            cold, cold_m = _build(recipe, root, cache, 0)
            warm, warm_m = _build(recipe, root, cache, 1)
            print(f"{recipe}: cold {cold:5.1f} s ({cold_m}); warm {warm:5.1f} s ({warm_m})")
            print(f"{recipe}: warm/cold {warm / cold:.0%}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: findcuda_standin_cache_bench.py RENDERED_MAGMA_RECIPE [...]")
    main([Path(p) for p in sys.argv[1:]])

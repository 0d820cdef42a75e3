"""FindCUDA's `-M` dependency pass against the real compile, on real magma kernels.

FindCUDA (magma 2.6's cuda_add_library) runs nvcc twice per .cu file: `nvcc -M` for a dependency
file, then the compile. The compile cache serves the compile; this measures what the `-M` pass
costs next to it, i.e. what a warm build still pays per kernel when `-M` is not cached.
Run: python bench/findcuda_depend_pass_bench.py MAGMA_SRC [KERNEL.cu ...]
(MAGMA_SRC: a generated magma 2.6.1 tree; nvcc from PATH, -gencode for sm_90, magma's CMake flags;
cuBLAS/cuSPARSE headers through CPATH where the toolkit lacks them.)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELS = ("dgemm_fermi.cu", "dgemv_fermi.cu", "zlacpy.cu", "dznrm2.cu")
INCLUDES = ("include", "control", "magmablas", "sparse/include", "sparse/control", "testing")
# What magma 2.6.1's CMake passes (FindCUDA's run_nvcc.cmake, build type Release, GPU_TARGET=All).
FLAGS = (
    *("-ccbin", "/usr/bin/cc", "-m64", "--std", "c++11"),
    *("-Xfatbin", "-compress-all", "-compress-mode=size"),
    *("-gencode", "arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC", "-DADD_", "-DNVCC"),
)


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(src: Path, kernels: list[str]) -> None:
    includes = [f"-I{src / d}" for d in INCLUDES]
    total_m = total_c = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        includes.append(f"-I{tmp}")  # magma_config.h, which CMake generates in the build dir
        Path(tmp, "magma_config.h").write_text("#pragma once\n")
        for name in kernels:
            cu = str(src / "magmablas" / name)
            out = str(Path(tmp) / name)
            m = _timed(["nvcc", "-M", "-D__CUDACC__", cu, "-o", f"{out}.d", *FLAGS, *includes])
            c = _timed(["nvcc", cu, "-c", "-o", f"{out}.o", *FLAGS, *includes])
            total_m, total_c = total_m + m, total_c + c
            print(f"{name:28s} -M {m:6.2f} s   compile {c:7.2f} s   -M/compile {m / c:6.1%}")
    label = f"all {len(kernels)}"
    print(f"{label:28s} -M {total_m:6.2f} s   compile {total_c:7.2f} s   -M/compile {total_m / total_c:6.1%}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: findcuda_depend_pass_bench.py MAGMA_SRC [KERNEL.cu ...]")
    main(Path(sys.argv[1]), sys.argv[2:] or list(KERNELS))

#!/usr/bin/env bash
# The magma-cudaXY package test (the package installed in a fresh test environment).
# Always: the package is libmagma.a + headers (no shared library, no magma_sparse), and the
# test program compiles against the installed headers when nvcc and a C++ compiler are on PATH.
# With an NVIDIA GPU visible: the program is linked against libmagma.a + cuBLAS + a CPU LAPACK
# (magma's LU factors its panels on the CPU) and run; a wrong answer fails the test.
set -euo pipefail
cd "$(dirname "$0")"  # the test's files (this script and magma_dgesv_test.cpp)
lib="${PREFIX}/lib/libmagma.a"
test -f "${lib}"
test -f "${PREFIX}/include/magma_v2.h"
test ! -e "${PREFIX}/lib/libmagma.so"
test ! -e "${PREFIX}/lib/libmagma_sparse.a"
echo "condapipe: libmagma.a with $(ar t "${lib}" | wc -l) objects, headers, no shared library, no magma_sparse"

cxx=${CXX:-g++}
if ! command -v nvcc > /dev/null || ! command -v "${cxx}" > /dev/null; then
    echo "condapipe: no nvcc or ${cxx} on PATH: magma_dgesv_gpu test program skipped"
    exit 0
fi
# The toolkit root as nvcc itself reports it (nvcc on PATH may be a wrapper or a symlink).
top=$(touch empty.cu && nvcc --dryrun -c empty.cu 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
cuda_home=$(cd "${top:?nvcc --dryrun reports no TOP}" && pwd -P)
cuda_inc=${cuda_home}/targets/$(uname -m)-linux/include
cuda_lib=${cuda_home}/targets/$(uname -m)-linux/lib
[[ -d "${cuda_inc}" ]] || cuda_inc=${cuda_home}/include
[[ -d "${cuda_lib}" ]] || cuda_lib=${cuda_home}/lib64
"${cxx}" -O2 -fopenmp -DADD_ -I"${PREFIX}/include" -I"${cuda_inc}" -c magma_dgesv_test.cpp -o magma_dgesv_test.o
echo "condapipe: magma_dgesv_test.cpp compiles against the package's headers (CUDA ${cuda_home})"

if ! nvidia-smi -L > /dev/null 2>&1; then
    echo "condapipe: no NVIDIA GPU visible (nvidia-smi -L fails): linking and running magma_dgesv_gpu skipped"
    exit 0
fi
# A CPU LAPACK for magma's panels: the first of these that provides dgetrf_.
printf 'extern "C" void dgetrf_();\nint main() { dgetrf_(); }\n' > probe.cpp
lapack=""
for candidate in "-llapack -lblas" "-l:liblapack.so.3 -l:libblas.so.3" "-lopenblas"; do
    read -r -a flags <<< "${candidate}"
    if "${cxx}" probe.cpp "${flags[@]}" -o probe 2> /dev/null; then
        lapack=${candidate}
        break
    fi
done
if [[ -z "${lapack}" ]]; then
    echo "condapipe: a GPU is visible but no CPU LAPACK links (tried -llapack -lblas, liblapack.so.3," \
        "-lopenblas): magma_dgesv_gpu run skipped; install liblapack3 (or OpenBLAS) to run it"
    exit 0
fi
read -r -a lapack_flags <<< "${lapack}"
"${cxx}" -fopenmp magma_dgesv_test.o "${lib}" -L"${cuda_lib}" -Wl,-rpath,"${cuda_lib}" \
    -lcublas -lcusparse -lcudart -lcudadevrt "${lapack_flags[@]}" -lpthread -ldl -lrt -o magma_dgesv_test
echo "condapipe: linked against libmagma.a, cuBLAS and ${lapack}"
./magma_dgesv_test 1024

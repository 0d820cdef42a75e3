#!/usr/bin/env bash
# Issue 8 in one command on a GPU machine without a package index (the lent H100):
#   environment -> gpu_proof.py (build/verify/install/run table) -> fatbin_compare.py (every
#   binary built there, an `nvcc -arch=native` object and the nvcc -gencode matrix) -> pytest -m gpu.
# Each step has its own time limit so the whole stays under 10 minutes; results go to OUT:
#   env.txt, gpu_proof.md/.json, fatbin_compare.md/.json, pytest_gpu.log, steps.txt
#
# usage: [FATBIN_ONLY=WORD] scripts/gpu_proof_device.sh [WHEEL_DIR]     (WHEEL_DIR: cp312 wheels, default .whl;
#        none needed when condapipe and its dependencies are installed already)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-proof-out}
wheels=${1:-$root/.whl}
site=${SITE:-/tmp/condapipe-site}
work=${WORK:-/tmp/gpu-proof}
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1

step() {  # step NAME LIMIT_S COMMAND...: run, time it, note its exit status in steps.txt
    local name=$1 limit=$2 t0 rc ms
    shift 2
    echo "=== $name (limit ${limit}s)"
    t0=$(date +%s%N)
    timeout "$limit" "$@"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    printf '%-16s exit %3d  %4d.%03d s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000)) | tee -a "$out/steps.txt"
    return "$rc"
}

{
    date -u
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    cuobjdump --version 2>&1 | tail -2
    python3 --version
    nproc
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

if [ -d "$wheels" ]; then
    step setup 120 "$root/scripts/gpu_machine_env.sh" "$wheels" "$site" || exit 3
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PATH=$site/bin:$PATH
fi

step gpu_proof 240 python3 "$root/scripts/gpu_proof.py" --work "$work/proof" --out "$out"

# nvcc's own idea of "native", as a binary for the comparison and a cross-check of condapipe's.
printf '__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n' >"$work/native.cu"
nvcc -arch=native -c -o "$work/nvcc-arch-native.o" "$work/native.cu" 2>&1 | tail -3
native_files=()
[ -f "$work/nvcc-arch-native.o" ] && native_files=(--file "$work/nvcc-arch-native.o")

shopt -s nullglob
packages=()
for p in "$work"/proof/channel/linux-64/*.conda; do packages+=(--package "$p"); done
step fatbin_compare 180 python3 "$root/scripts/fatbin_compare.py" "${packages[@]}" "${native_files[@]}" \
    --nvcc-matrix ${FATBIN_ONLY:+--only "$FATBIN_ONLY"} --work "$work/compare" --json-out "$out/fatbin_compare.json" --md-out "$out/fatbin_compare.md" \
    | tail -n 25

# test_gpu_proof.py's gpu test is gpu_proof.py again: already run above.
mapfile -t gpu_tests < <(grep -l "mark.gpu" "$root"/tests/*/test_*.py | grep -v "/test_gpu_proof.py$")
step pytest_gpu 150 python3 -m pytest -m gpu -q -p no:cacheprovider --continue-on-collection-errors \
    "${gpu_tests[@]}" >"$out/pytest_gpu.log" 2>&1
tail -n 15 "$out/pytest_gpu.log"
cat "$out/steps.txt"

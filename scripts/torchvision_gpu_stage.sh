#!/usr/bin/env bash
# Stage what scripts/torchvision_gpu_proof.sh needs on the GPU machine (which has no network) into
# one folder: torchvision's release source, Debian's binary packages of libpng / libjpeg-turbo /
# libwebp (the recipe's image libraries, unpacked there into a host prefix), a ninja binary, and the
# torchvision recipe condapipe renders for the machine's torch (2.11.0 + CUDA 13.0, Python 3.12,
# arch 9.0) with its variant keys as a sourceable file.
#
# usage: scripts/torchvision_gpu_stage.sh VISION_SOURCE DEBS_DIR WHEELS_DIR [STAGE]
#   VISION_SOURCE  pytorch-vision_X.Y.Z.orig.tar.gz (Debian: apt-get source --download-only
#                  pytorch-vision=0.21.0-3; 0.27.0 / 0.29.1 of newer suites 404 here)
#   DEBS_DIR       apt-get download libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo
#                  libwebp-dev libwebp7 libwebpdemux2 libwebpmux3
#   WHEELS_DIR     pip download --no-deps "setuptools<81" pip -d DIR (0.14-0.21's setup.py imports
#                  pkg_resources, which setuptools 81 removed; the machine's venv may hold a newer one)
#   STAGE          default .condapipe/torchvision-gpu (git-ignored: pass it to the device as carry)
# The recipe is torchvision 0.26.0's, the release torch 2.11 pairs with; its source is not available
# here, so the proof builds the staged source with that recipe and records both versions.
set -euo pipefail

[[ $# -ge 3 ]] || { echo "usage: $0 VISION_SOURCE DEBS_DIR WHEELS_DIR [STAGE]" >&2; exit 2; }
source_tarball=$1
debs=$2
wheels=$3
stage=${4:-.condapipe/torchvision-gpu}
condapipe=${CONDAPIPE:-condapipe}

[[ -f "${source_tarball}" ]] || { echo "error: ${source_tarball}: no such file" >&2; exit 2; }
[[ -d "${debs}" ]] || { echo "error: ${debs}: no such folder" >&2; exit 2; }
rm -rf "${stage}.tmp"
mkdir -p "${stage}.tmp/debs"
cp "${source_tarball}" "${stage}.tmp/vision-source.tar.gz"
for name in libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo libwebp-dev libwebp7 libwebpdemux2 libwebpmux3; do
    found=("${debs}/${name}"_*.deb)
    [[ -f "${found[0]}" ]] || { echo "error: no ${name}_*.deb in ${debs}" >&2; exit 2; }
    cp "${found[0]}" "${stage}.tmp/debs/"
done
mkdir -p "${stage}.tmp/wheels"
for name in setuptools pip; do
    found=("${wheels}/${name}"-*.whl)
    [[ -f "${found[0]}" ]] || { echo "error: no ${name}-*.whl in ${wheels}" >&2; exit 2; }
    cp "${found[0]}" "${stage}.tmp/wheels/"
done
ninja_bin=$(python3 -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))')
cp "${ninja_bin}" "${stage}.tmp/ninja"

"${condapipe}" render torchvision --version 0.26.0 --cuda 13.0 --arch 9.0 --python 3.12 -o "${stage}.tmp/recipe"
# The variant keys build.sh reads from its environment, as a file bash can source.
python3 - "${stage}.tmp/recipe/variants.yaml" > "${stage}.tmp/variant.env" <<'PY'
import shlex
import sys

from ruamel.yaml import YAML

data = YAML(typ="safe").load(open(sys.argv[1], encoding="utf-8"))
for key, values in data.items():
    if key not in ("zip_keys", "python"):
        print(f"export {key}={shlex.quote(str(values[0]))}")
PY
rm -rf "${stage}"
mv "${stage}.tmp" "${stage}"
du -sh "${stage}"

#!/usr/bin/env bash
# Write a recipe for a local stand-in of conda-forge's `cuda-version` X.Y (cuda-version-feedstock):
# a metapackage with no files that pins which CUDA release the CUDA component packages of an
# environment belong to. A recipe's host asks for `cuda-version X.Y.*` (conda-forge's pytorch
# recipe does); a machine with no conda channel gets the same name and version from this. It stands
# in for one real conda-forge package only: a user has conda-forge's. The version is the machine's
# toolkit's (nvcc --version), or the one given.
#
# usage: scripts/standins/cuda_version_recipe.sh OUT_DIR [X.Y]   (then: condapipe build OUT_DIR ...)
set -euo pipefail
out=$1
version=${2:-}
if [[ -z "$version" ]]; then
    nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
    version=$("$nvcc" --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\),.*/\1/p')
fi
[[ "$version" =~ ^[0-9]+\.[0-9]+$ ]] || { echo "CUDA version '$version' is not X.Y" >&2; exit 1; }
major=${version%%.*}
mkdir -p "$out"
cat >"$out/recipe.yaml" <<RECIPE
package:
  name: cuda-version
  version: "${version}"
build:
  number: 0
  noarch: generic
requirements:
  run_constraints:
    - __cuda >=${major}
about:
  summary: "local stand-in for conda-forge's cuda-version ${version}: a metapackage, no files"
  license: LicenseRef-NVIDIA-End-User-License-Agreement
RECIPE
echo "cuda-version ${version}"

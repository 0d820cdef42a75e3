#!/usr/bin/env bash
# Write a recipe for a local stand-in of conda-forge's `libgomp` (GNU OpenMP runtime; conda-forge
# builds it from ctng-compilers-feedstock at the gcc versions 13.4.0 / 14.3.0 / 15.2.0) out of the
# machine's own libgomp.so.1, for a machine with no conda channel. It stands in for one real
# conda-forge package only: a user has conda-forge's. The version is the machine's gcc runtime's.
#
# usage: scripts/standins/libgomp_recipe.sh OUT_DIR   (then: condapipe build OUT_DIR ...)
set -euo pipefail
out=$1
so=$(gcc -print-file-name=libgomp.so.1)
so=$(readlink -f "$so")
[[ -f "$so" ]] || { echo "no libgomp.so.1 from gcc" >&2; exit 1; }
version=$(gcc -dumpfullversion)
[[ "$version" =~ ^[0-9]+(\.[0-9]+)*$ ]] || { echo "gcc version $version is not X.Y.Z" >&2; exit 1; }
mkdir -p "$out"
cp "$so" "$out/libgomp.so.1"
cat >"$out/recipe.yaml" <<RECIPE
package:
  name: libgomp
  version: "${version}"
source:
  path: libgomp.so.1
  file_name: libgomp.so.1
build:
  number: 0
  script:
    - mkdir -p \$PREFIX/lib
    - cp libgomp.so.1 \$PREFIX/lib/libgomp.so.1
about:
  summary: "local stand-in for conda-forge's libgomp ${version}: the machine's GNU OpenMP runtime"
  license: GPL-3.0-only WITH GCC-exception-3.1
RECIPE
echo "libgomp ${version} from ${so}"

#!/usr/bin/env bash
set -euo pipefail
# The channel's cmake (in the build environment), not one the machine happens to have.
test "$(command -v cmake)" = "$BUILD_PREFIX/bin/cmake"
echo "building with $(cmake --version | head -n 1) from $(command -v cmake)"
cmake -S . -B _build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib
cmake --build _build --parallel 2
cmake --install _build

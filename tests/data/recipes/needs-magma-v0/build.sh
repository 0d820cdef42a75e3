#!/usr/bin/env bash
set -euo pipefail
mkdir -p "$PREFIX/lib"
printf '#include <magma_v2.h>\nint f(void){return 0;}\n' > "$PREFIX/uses_magma.c"
gcc -c "$PREFIX/uses_magma.c" -o "$PREFIX/lib/uses_magma.o"

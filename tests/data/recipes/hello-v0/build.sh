#!/usr/bin/env bash
set -euo pipefail
mkdir -p "$PREFIX/bin"
printf 'int main(void){return 0;}\n' > "$PREFIX/hello.c"
gcc "$PREFIX/hello.c" -o "$PREFIX/bin/hello-v0"
rm "$PREFIX/hello.c"
echo "built hello-v0 with $(gcc -dumpfullversion)"

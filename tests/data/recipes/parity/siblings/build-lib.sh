#!/bin/bash
set -e
mkdir -p "$PREFIX/share/parity" && echo lib > "$PREFIX/share/parity/lib.txt"

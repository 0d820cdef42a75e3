#!/bin/bash
set -e
mkdir -p "$PREFIX/share/parity" && echo app > "$PREFIX/share/parity/app.txt"

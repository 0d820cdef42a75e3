#!/usr/bin/env bash
# A real PyTorch CPU package through condapipe on the lent GPU machine (16 cores, no network), in
# consecutive commands while the machine stays warm. What travels is at most 64 MiB a call, so the
# files come in parts (.gpu/carry/*) that `stash` moves aside; `setup` installs condapipe, unpacks the
# tree and makes the host channel; `start` launches the build detached (setsid: it outlives the
# command); `watch N` reports progress for N seconds and copies the logs to $OUT.
#
# usage: scripts/pytorch_cpu_device.sh stash|setup|start|watch SECONDS
# Files (made here by scripts/pytorch_tree/cpu_bundle.py and `pip download`, see
# scripts/pytorch_cpu_device_results.md): pytorch-2.6.0-cpu.tar.zst, condapipe's dependency wheels
# (site/*.whl), host wheels (host/*.whl: numpy, mkl, ...).
set -euo pipefail
stage=/root/stage
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
export PYTHONPATH=/root/site PATH=/root/site/bin:$PATH PYTHONUNBUFFERED=1
log=/root/build.log
t0() { date +%s; }

case "${1:-}" in
stash)
    mkdir -p "$stage"
    cp -a "$root"/.gpu/carry/. "$stage"/
    du -sh "$stage"; find "$stage" -maxdepth 2 | head -40
    ;;
setup)
    s=$(t0)
    cat "$stage"/tree.part.* >"$stage/pytorch-2.6.0-cpu.tar.zst" 2>/dev/null || true
    for w in "$stage"/host/*.whl.part.aa; do
        [ -e "$w" ] || continue
        cat "${w%.aa}".* >"${w%.part.aa}"
        rm -f "${w%.aa}".*
    done
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/site \
        --no-build-isolation "$stage"/site/*.whl "$root"
    condapipe --version
    mkdir -p /root/src
    "$py" -c 'import sys, tarfile, zstandard
with open(sys.argv[1], "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as z, tarfile.open(fileobj=z, mode="r|") as t:
    t.extractall(sys.argv[2], filter="data")' "$stage/pytorch-2.6.0-cpu.tar.zst" /root/src
    cat /root/src/pytorch-2.6.0/version.txt
    condapipe wheels "$stage"/host --to /root/host-channel
    echo "setup took $(( $(t0) - s )) s"
    ;;
start)
    cd /root
    # MAX_JOBS: all 16 cores (128 GiB: ~8 GiB a job is far more than a CPU TU needs).
    setsid nohup env MAX_JOBS=16 condapipe build pytorch --version 2.6.0 --python 3.12 --cuda cpu \
        --source /root/src/pytorch-2.6.0 --engine rattler-build --build-tools wheels \
        -c /root/host-channel --override-channels --output-dir /root/channel --work-dir /root/work \
        >"$log" 2>&1 </dev/null &
    echo "started at $(date -u +%FT%TZ) (pid $!)" | tee /root/started
    sleep 20; tail -5 "$log"
    ;;
watch)
    end=$(( $(t0) + ${2:-60} ))
    while [ "$(t0)" -lt "$end" ]; do
        step=$(find /root/work -path '*logs/*.log' -exec grep -hoa '\[[0-9]*/[0-9]*\]' {} + 2>/dev/null | tail -1 || true)
        echo "$(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) ninja ${step:-none} | $(tail -c 160 "$log" | tr '\n' ' ')"
        pgrep -f "condapipe build pytorch" >/dev/null || { echo "build process ended"; break; }
        sleep 60
    done
    cat /root/started
    mkdir -p "$OUT"
    cp "$log" "$OUT/condapipe-build.log" || true
    find /root/work -path '*logs/*.log' -exec sh -c 'tail -c 15000000 "$1" >"$2/$(basename "$1")"' _ {} "$OUT" \; || true
    find /root/work -path '*logs/*.log' -exec grep -hoa '\[[0-9]*/[0-9]*\]' {} + 2>/dev/null | tail -1 || true
    ;;
*)
    echo "usage: $0 stash|setup|start|watch SECONDS" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Issue 33, item 2: one real CUDA PyTorch package through condapipe on the lent 64-core GPU machine
# (4x H200, no network): magma-cuda130 first, then `condapipe build pytorch --version 2.6.0 --cuda
# 13.0 --arch 9.0 --python 3.12` (rattler-build, offline) through build -> fix -> verify -> test ->
# publish, then a fresh environment from the channel on the GPU: import torch, is_available,
# get_arch_list, and PyTorch 2.6.0's own test_cuda.py / test_linalg.py / test_torch.py on cuda.
#
# Where everything comes from (scripts/pytorch_cuda13_package_results.md says why):
#   - condapipe and its dependencies, the tree, PyTorch's tests, the host wheels (numpy, mkl, ...):
#     the CPU run's carry, .gpu/carry/part00..06 + MANIFEST.txt (scripts/pytorch_cpu_device.sh);
#   - the CUDA-only submodules (cutlass, NVTX, cudnn_frontend), magma 2.6.1's generated tree and
#     the nvidia-nvml-dev wheel: .gpu/carry-cu13pkg/part00 (`pack`, here);
#   - cuBLAS, cuFFT, cuRAND, cuSOLVER, cuSPARSE, nvJitLink, NVRTC, cudart, CUPTI, NVTX, cuDNN, NCCL: the
#     nvidia-* wheels installed in the machine's python, written back out as wheels from their
#     RECORD (scripts/installed_wheel.py, every file's sha256 checked) and made into conda-forge's
#     packages by `condapipe wheels` (libcublas/-dev, ..., libcudnn/-dev, nccl);
#   - the toolkit (nvcc, cudart headers, CCCL, CUPTI): the machine's /usr/local/cuda-13.0;
#   - cuda-version 13.0 and libgomp: local stand-ins of conda-forge's (scripts/standins/).
#
# 2.6 + CUDA 13 is refused by pytorch.yaml's cannot_compile until item 1's whole-tree compile shows
# no failure. `LIFT_CUDA13_REFUSAL=1 ... setup` lifts it for this run only: it applies
# scripts/pytorch_cuda13_lift_refusal.patch (the same change as the branch's last commit) to the
# copy of condapipe this machine installs, and says so; without it setup stops at the refusal.
#
# Calls, back to back (the machine goes back 30 s after a command ends; at most 10 min a call).
# While the detached build runs, a `watch` call must always be in flight: the first hold lost its
# build, its kept tree and its ninja -k 0 when 70 s passed between two calls.
#   here:   scripts/pytorch_cuda13_package_device.sh pack
#   device: stash                      carry [.gpu/carry33/call00] (condapipe's wheels, the manifest)
#           stash && early             carry [.gpu/carry33/call01, .gpu/carry-cu13pkg/part00]: condapipe
#                                      installed (LIFT_CUDA13_REFUSAL=1), magma started detached, so it
#                                      compiles while the other parts arrive
#           stash                      carry [.gpu/carry33/call02] ... up to the last call folder
#           stash                      carry [.gpu/carry-spare] (pack's MAGMA_SPARE=FILE: an earlier hold's
#                                      magma-cuda130, used by the driver only if this hold's magma build fails)
#           stash && setup && start    with the last folder: tree, tests, channels, stand-ins, then the
#                                      detached driver (the hold's end: first stash + 1730 s, or
#                                      HOLD_END / HOLD_LEFT): waits for magma,
#                                      builds pytorch, then by itself: after a failure `failures`, after
#                                      success `env` and `tests`, each stopped 2 min before the hold ends.
#                                      COMPILE_CACHE=DIR adds --compile-cache (a rerun in the same hold
#                                      reuses objects; a new machine starts empty)
#           watch SECONDS              progress (ninja [n/N], rate, load), results to $OUT; repeat
#           failures [SECONDS]         `ninja -k 0` over what is left in the build's own tree (item 1
#                                      folded in), every failure listed
#           env                        fresh environment from the channels: import torch, GPU checks
#           tests SECONDS              2.6.0's test_cuda.py, test_linalg.py, test_torch.py (cuda)
#           svd                        scripts/pytorch_svd_backends_check.py in the fresh environment:
#                                      which SVD path (backend, driver, dtype) is wrong (the driver runs it)
#           bring K                    the built pytorch package back, pieces 4K..4K+3 of 15 MiB (a
#                                      147 MiB package: bring 0, 1, 2), so a later hold need not rebuild it
#   BASE (default /root) holds everything; PYTHON (default python3) is the machine's python.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
base=${BASE:-/root}
stage=$base/stage
stage13=$base/stage-cu13
files=$base/files
out=${OUT:-$base/out}
log=$base/build.log
magma_log=$base/magma.log
cpu_carry=$root/.gpu/carry
carry13=$root/.gpu/carry-cu13pkg
carry33=$root/.gpu/carry33
carry_spare=$root/.gpu/carry-spare
part_bytes=$((60 * 1024 * 1024))
# a call carries the working tree too (~3.5 MB) under the 64 MiB limit
call_bytes=$((58 * 1024 * 1024))
# The machine's nvidia-* distributions the package's CUDA libraries are made from.
# NVIDIA_DISTS (space-separated) replaces the list, e.g. for a rehearsal without CUPTI's wheel.
default_dists="nvidia-cublas nvidia-cufft nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-nvjitlink"
default_dists+=" nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cupti nvidia-nvtx nvidia-cudnn-cu13 nvidia-nccl-cu13"
read -r -a nvidia_dists <<<"${NVIDIA_DISTS:-$default_dists}"
export PYTHONUNBUFFERED=1
t0() { date +%s; }
tree() { dirname "$(find "$base/src" -maxdepth 2 -name version.txt | head -1)"; }
site_env() { export PYTHONPATH=$base/site PATH=$base/site/bin:$PATH; }
# When this machine goes back: HOLD_END (epoch seconds), else HOLD_LEFT (seconds from now), else
# HOLD_SECONDS (default 1730: a fresh 1800 s budget less the machine's start and a margin) after the
# hold's first stash. The tests and ninja -k 0 stop 2 min before, so a last watch brings them back.
hold_end() {
    if [ -n "${HOLD_END:-}" ]; then
        echo "$HOLD_END"
    elif [ -n "${HOLD_LEFT:-}" ]; then
        echo $(($(t0) + HOLD_LEFT))
    else
        echo $(($(cat "$base/hold_start" 2>/dev/null || t0) + ${HOLD_SECONDS:-1730}))
    fi
}
# Join the carried files of the given kinds from their pieces (sha256 and size of each checked)
join_files() {
    "$py" - "$stage" "$files" "$@" <<'PY'
import hashlib, pathlib, sys
stage, dest, kinds = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), set(sys.argv[3:])
count = 0
for line in (stage / "call00" / "MANIFEST.txt").read_text().splitlines():
    if not line.strip() or line.startswith("#"):
        continue
    sha, size, kind, name, *parts = line.split()
    if kind not in kinds:
        continue
    out = dest / kind / name
    out.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(out, "wb") as fh:
        for part in parts:
            data = (stage / part).read_bytes()
            h.update(data)
            fh.write(data)
    if h.hexdigest() != sha or out.stat().st_size != int(size):
        sys.exit(f"{name}: sha256 or size mismatch ({len(parts)} pieces)")
    count += 1
print("joined", count, "files of", " ".join(sorted(kinds)))
PY
}
# PyTorch's test tools (pytest, hypothesis, expecttest, xdist) from the carried host wheels, once
test_site() {
    [ -f "$base/testsite/.done" ] && return 0
    rm -rf "$base/testsite"
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$base/testsite" \
        "$files"/host/pytest-*.whl "$files"/host/pluggy-*.whl "$files"/host/iniconfig-*.whl \
        "$files"/host/packaging-*.whl "$files"/host/hypothesis-*.whl "$files"/host/attrs-*.whl \
        "$files"/host/sortedcontainers-*.whl "$files"/host/expecttest-*.whl \
        "$files"/host/pytest_xdist-*.whl "$files"/host/execnet-*.whl "$files"/host/psutil-*.whl
    touch "$base/testsite/.done"
}
# condapipe as this run installs it: a copy of this tree, the refusal lifted only on request
install_condapipe() {
    rm -rf "$base/condapipe-src" && mkdir -p "$base/condapipe-src"
    (cd "$root" && tar --exclude=./.gpu --exclude=./.git -cf - .) | tar -xf - -C "$base/condapipe-src"
    if [ "${LIFT_CUDA13_REFUSAL:-0}" = 1 ]; then
        if patch -d "$base/condapipe-src" -p1 --dry-run --batch --fuzz=0 -s <"$root/scripts/pytorch_cuda13_lift_refusal.patch" >/dev/null; then
            patch -d "$base/condapipe-src" -p1 --batch --fuzz=0 -s <"$root/scripts/pytorch_cuda13_lift_refusal.patch"
            echo "LIFT_CUDA13_REFUSAL=1: cannot_compile lifted for pytorch 2.6 + CUDA >= 13.0, for this run only" | tee -a "$out/machine.txt" "$base/machine.txt"
        else
            echo "LIFT_CUDA13_REFUSAL=1: the lift does not apply (already in the tree?); data left as it is" | tee -a "$out/machine.txt" "$base/machine.txt"
        fi
    fi
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$base/build-site" \
        "$files"/site/setuptools-*.whl
    PYTHONPATH=$base/build-site "$py" -m pip wheel -q --no-index --no-deps --no-build-isolation -w "$base/cpwheel" "$base/condapipe-src"
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$base/site" \
        "$files"/site/*.whl "$base"/cpwheel/condapipe-*.whl
    touch "$base/condapipe.installed"
}
# magma needs only its source, the toolkit and the cmake/ninja tool channel: it compiles (~215 s
# on 64 cores, one arch) while the other carried parts arrive and setup runs single-threaded.
# MAGMA_CHANNEL: a magma-cuda130 package from an earlier hold (watch brings it back), no build.
start_magma() {
    rm -rf "$base/magma-src" && mkdir -p "$base/magma-src" && tar -xJf "$stage13"/magma-*.tar.xz -C "$base/magma-src"
    rm -f "$base/magma.done"
    if ls "$stage13"/magma-cuda130-*.conda >/dev/null 2>&1; then
        mkdir -p "$base/magma-channel/linux-64" "$base/magma-channel/noarch"
        cp "$stage13"/magma-cuda130-*.conda "$base/magma-channel/linux-64/"
        condapipe index "$base/magma-channel" >/dev/null
        MAGMA_CHANNEL=$base/magma-channel
    fi
    echo "${MAGMA_CHANNEL:-}" >"$base/magma-channel.txt"
    if [ -z "${MAGMA_CHANNEL:-}" ]; then
        cat >"$base/magma.sh" <<EOF
#!/usr/bin/env bash
export PYTHONPATH=$base/site PATH=$base/site/bin:\$PATH PYTHONUNBUFFERED=1
cd $base
echo "magma started \$(date -u +%FT%TZ)"
condapipe build magma --cuda 13.0 --arch 9.0 --source "$(ls -d "$base"/magma-src/*/ | head -1)" \\
    --engine rattler-build --build-tools wheels --override-channels \\
    --output-dir $base/channel --work-dir $base/work-magma
echo "magma exit \$? \$(date -u +%FT%TZ)" | tee $base/magma.done
EOF
        chmod +x "$base/magma.sh"
        setsid nohup "$base/magma.sh" >"$magma_log" 2>&1 </dev/null &
        echo "magma build started in the background (pid $!), log $magma_log"
    else
        echo "magma from $MAGMA_CHANNEL" | tee "$base/magma.done"
    fi
}

case "${1:-}" in
pack)  # here: the CPU run's carry (hard links of the main checkout's) and one part of CUDA extras
    real_tree=${REAL_TREE:-/work/trees/pytorch-2.6.0}
    if [ ! -f "$cpu_carry/MANIFEST.txt" ]; then
        mkdir -p "$root/.gpu"
        cp -al "${CPU_CARRY:-/work/main/.gpu/carry}" "$cpu_carry"
    fi
    rm -rf "$carry13.tmp" && mkdir -p "$carry13.tmp/part00"
    (cd "$real_tree/.." && tar --exclude='cutlass/test' --exclude='cutlass/examples' --exclude='cutlass/docs' \
        --exclude='cutlass/media' --exclude='cutlass/python' --exclude='.git' -cf - \
        "$(basename "$real_tree")/third_party/cutlass" "$(basename "$real_tree")/third_party/NVTX" \
        "$(basename "$real_tree")/third_party/cudnn_frontend") |
        zstd -q -19 -T0 -o "$carry13.tmp/part00/cuda-submodules.tar.zst"
    cp "${MAGMA_TARBALL:-/work/main/.magma-resume/magma-2.6.1.tar.xz}" "$carry13.tmp/part00/"
    cp "${NVML_WHEEL:-$(ls /tmp/cu13-33/wheels/nvidia_nvml_dev-13.0.*.whl | head -1)}" "$carry13.tmp/part00/"
    cp "${REZIP:-/work/main/.gpu/rezip_wheel.py}" "$carry13.tmp/part00/"  # re-zips the CPU carry's mkl wheel
    # an earlier hold's magma (watch returns it as magma-cuda130.conda.partNN; cat them in order)
    if [ -n "${MAGMA_PACKAGE:-}" ]; then cp "$MAGMA_PACKAGE" "$carry13.tmp/part00/"; fi
    (cd "$carry13.tmp/part00" && sha256sum ./* | sed 's|\./||') >"$carry13.tmp/MANIFEST-cu13.txt"
    mv "$carry13.tmp/MANIFEST-cu13.txt" "$carry13.tmp/part00/"
    size=$(du -sb "$carry13.tmp/part00" | cut -f1)
    [ "$size" -le "$part_bytes" ] || { echo "cu13 part is $size bytes, over $part_bytes" >&2; exit 1; }
    rm -rf "$carry13" && mv "$carry13.tmp" "$carry13"
    # MAGMA_SPARE: an earlier hold's magma-cuda130, used only if this hold's magma build fails (`spare`);
    # a folder of its own (20 MiB), carried with one more `stash` call before the last one
    rm -rf "$carry_spare"
    if [ -n "${MAGMA_SPARE:-}" ]; then
        mkdir -p "$carry_spare" && cp "$MAGMA_SPARE" "$carry_spare/spare-$(basename "$MAGMA_SPARE")"
    fi
    # The CPU carry's files again, grouped by when the device needs them: condapipe's own wheels
    # first (call01 also carries the CUDA extras, and `early` starts magma there), then the tree and
    # the tests, then the host wheels; each call's folder at most $call_bytes.
    rm -rf "$carry33.tmp" && mkdir -p "$carry33.tmp"
    python3 - "$cpu_carry" "$carry33.tmp" "$call_bytes" "$(du -sb "$carry13/part00" | cut -f1)" <<'PY'
import hashlib, pathlib, sys
src, dest, limit, extra = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
order = {"site": 0, "tree": 1, "test": 2, "host": 3}
header, entries = [], []
for line in (src / "MANIFEST.txt").read_text().splitlines():
    if not line.strip() or line.startswith("#"):
        header.append(line)
        continue
    sha, size, kind, name, *parts = line.split()
    entries.append((order[kind], sha, int(size), kind, name, parts))
entries.sort(key=lambda e: e[0])
lines = ["# regrouped for the CUDA run: callNN/NAME.KK pieces, in numeric order, across call folders"] + header
call, used = 0, 0
for _, sha, size, kind, name, parts in entries:
    data = b"".join((src / p).read_bytes() for p in parts)
    if hashlib.sha256(data).hexdigest() != sha or len(data) != size:
        sys.exit(f"{name}: the CPU carry's pieces do not join to the manifest's file")
    pieces, off = [], 0
    while True:
        room = limit - (extra if call == 1 else 0) - used
        if room <= 0:
            call, used = call + 1, 0
            continue
        chunk = data[off : off + room]
        piece = f"call{call:02d}/{name}.{len(pieces):02d}"
        (dest / f"call{call:02d}").mkdir(exist_ok=True)
        (dest / piece).write_bytes(chunk)
        pieces.append(piece)
        used += len(chunk)
        off += len(chunk)
        if off >= size:
            break
    lines.append(" ".join([sha, str(size), kind, name, *pieces]))
(dest / "call00" / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
print(f"{len(entries)} files in {call + 1} calls")
PY
    rm -rf "$carry33" && mv "$carry33.tmp" "$carry33"
    du -sh "$carry33"/call* "$carry13"/part*
    n=$(find "$carry33" -maxdepth 1 -name 'call*' | wc -l)
    echo "device calls: stash [.gpu/carry33/call00]; stash+early [.gpu/carry33/call01, .gpu/carry-cu13pkg/part00];"
    echo "  stash [.gpu/carry33/call02] ... [.gpu/carry33/call$(printf %02d $((n - 1)))] (the last: stash setup start)"
    ;;
stash)  # each call's carried parts go where the next call's tree copy will not remove them
    mkdir -p "$stage" "$stage13"
    # the first call of a hold notes the machine's clock: `start` counts the hold's end from it
    [ -f "$base/hold_start" ] || date +%s >"$base/hold_start"
    if [ -d "$carry33" ]; then cp -a "$carry33"/. "$stage"/; fi
    if [ -d "$carry13" ]; then cp -a "$carry13"/part*/. "$stage13"/; fi
    if [ -d "$carry_spare" ]; then cp -a "$carry_spare"/. "$stage13"/; fi
    du -sh "$stage" "$stage13"
    ;;
early)  # with call01: condapipe installed from its wheels and magma started, while the rest arrives
    s=$(t0)
    mkdir -p "$out" "$files"
    rm -f "$base/condapipe.installed" "$base/magma-channel.txt" "$base/machine.txt"
    (cd "$stage13" && sha256sum -c --quiet MANIFEST-cu13.txt)
    join_files site
    install_condapipe
    site_env
    condapipe --version
    start_magma
    echo "early took $(($(t0) - s)) s" | tee -a "$base/machine.txt"
    ;;
setup)
    s=$(t0)
    mkdir -p "$out" "$files"
    {
        date -u
        nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>&1 || true
        /usr/local/cuda-13.0/bin/nvcc --version 2>&1 | tail -2
        "$py" --version
        echo "cores: $(nproc)"
        ls /usr/local/cuda-13.0/include/{cublas_v2.h,cufft.h,nvml.h,cupti.h} /usr/local/cuda-13.0/lib64/stubs 2>&1 || true
    } | tee -a "$base/machine.txt"
    (cd "$stage13" && sha256sum -c --quiet MANIFEST-cu13.txt)
    if [ -f "$base/condapipe.installed" ]; then
        join_files tree test host
    else
        join_files site tree test host
        install_condapipe
    fi
    site_env
    condapipe --version
    grep -o 'rezip_wheel.py [^ ]*\.contents\.tar\.zst [^ ]*\.whl' "$stage/call00/MANIFEST.txt" | while read -r _ tarname whl; do
        "$py" "$stage13/rezip_wheel.py" "$files/host/$tarname" "$files/host/$whl" && rm -f "$files/host/$tarname"
    done
    rm -rf "$base/src" && mkdir -p "$base/src"
    for t in "$files"/tree/*.tar.zst "$files"/test/*.tar.zst "$stage13"/cuda-submodules.tar.zst; do
        "$py" -c 'import sys, tarfile, zstandard
with open(sys.argv[1], "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as z, tarfile.open(fileobj=z, mode="r|") as t:
    t.extractall(sys.argv[2], filter="data")' "$t" "$base/src"
    done
    echo "tree: $(tree)"
    if [ ! -f "$base/magma-channel.txt" ]; then start_magma; fi
    # Host channel: the CPU run's host wheels (numpy, mkl, ...) and this CPython
    rm -rf "$base/host-channel" "$base/cuda-channel" "$base/cuda-wheels"
    condapipe wheels "$files"/host/*.whl --to "$base/host-channel" | tail -1
    # CUDA libraries: the machine's installed nvidia-* wheels, written out again, then laid out as
    # conda-forge's packages; nvml-dev (headers only) carried
    c=$(t0)
    "$py" "$root/scripts/installed_wheel.py" "$base/cuda-wheels" "${nvidia_dists[@]}" | tee "$base/cuda-wheels.txt"
    cp "$base/cuda-wheels.txt" "$out/"  # each call has a fresh $OUT: what later calls read stays in $base
    condapipe wheels --no-python "$base"/cuda-wheels/*.whl "$stage13"/nvidia_nvml_dev-*.whl --to "$base/cuda-channel" | tail -1
    echo "CUDA library packages: $(($(t0) - c)) s"
    "$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); [print(r["name"], r["version"], r["size"]) for r in sorted(d["packages.conda"].values(), key=lambda r: r["name"])]' \
        "$base/cuda-channel/linux-64/repodata.json" | tee "$out/cuda-channel.txt"
    # Stand-ins of conda-forge's libgomp and cuda-version
    "$root/scripts/standins/libgomp_recipe.sh" "$base/standin/libgomp"
    CUDA_HOME=/usr/local/cuda-13.0 "$root/scripts/standins/cuda_version_recipe.sh" "$base/standin/cuda-version" 13.0
    for r in libgomp cuda-version; do
        (cd "$base" && condapipe build "$base/standin/$r" --engine rattler-build --output-dir "$base/standin-channel" \
            --work-dir "$base/work-standin-$r" | tail -2)
    done
    echo "setup took $(($(t0) - s)) s" | tee -a "$base/machine.txt"
    ;;
start)  # once setup's magma build is done (or MAGMA_CHANNEL has it), pytorch; one detached driver
    site_env
    cd "$base"
    tr=$(tree)
    cudnn=$(sed -n 's/^nvidia_cudnn_cu13-\([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' "$base/cuda-wheels.txt" | head -1)
    channels=(-c "$base/host-channel" -c "$base/cuda-channel" -c "$base/standin-channel")
    hold_end=$(hold_end)
    echo "hold ends $(date -u -d "@$hold_end" +%T) (in $((hold_end - $(t0))) s)"
    magma_channel=$(cat "$base/magma-channel.txt" 2>/dev/null || true)
    if [ -n "$magma_channel" ]; then channels+=(-c "$magma_channel"); fi
    cat >"$base/driver.sh" <<EOF
#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH=$base/site PATH=$base/site/bin:\$PATH PYTHONUNBUFFERED=1
cd $base
while [ ! -f $base/magma.done ]; do sleep 5; done  # setup started magma
cat $base/magma.done
spare=\$(OUT=$base/results BASE=$base PYTHON=$py bash $base/condapipe-src/scripts/pytorch_cuda13_package_device.sh spare)
echo "pytorch started \$(date -u +%FT%TZ)"
condapipe build pytorch --version 2.6.0 --python 3.12 --cuda 13.0 --arch 9.0 ${cudnn:+--cudnn $cudnn} \\
    --source "$tr" --engine rattler-build --build-tools wheels ${channels[*]} \$spare --override-channels \\
    ${COMPILE_CACHE:+--compile-cache $COMPILE_CACHE} --output-dir $base/channel --work-dir $base/work
rc=\$?
echo "pytorch exit \$rc \$(date -u +%FT%TZ)"
# What follows runs without waiting for a call: after a failure every remaining object with
# ninja -k 0 (item 1), after success the fresh environment and the tests; each ends before the hold.
left() { l=\$(($hold_end - \$(date +%s) - 120)); [ \$l -gt 60 ] && echo \$l || echo 60; }
dev() { OUT=$base/results BASE=$base PYTHON=$py bash $base/condapipe-src/scripts/pytorch_cuda13_package_device.sh "\$@"; }
mkdir -p $base/results
if [ \$rc -ne 0 ]; then
    dev failures \$(left)
    # a package the plan built but did not publish (refused after the compile): still run on the GPU
    pkg=\$(find $base/work -name 'pytorch-2.6.0-*.conda' -size +1M 2>/dev/null | head -1)
    if [ -n "\$pkg" ]; then
        echo "unpublished package \$pkg: its GPU checks and tests run from a channel of its own"
        mkdir -p $base/unpublished/linux-64 $base/unpublished/noarch && cp "\$pkg" $base/unpublished/linux-64/
        cp $base/channel/linux-64/magma-*.conda $base/unpublished/linux-64/ 2>/dev/null
        condapipe index $base/unpublished
        ENV_CHANNEL=$base/unpublished dev env
        dev tests \$(left)
    fi
else
    dev env
    dev svd
    dev tests \$(left)
fi
echo "driver done \$(date -u +%FT%TZ)"
EOF
    chmod +x "$base/driver.sh"
    setsid nohup "$base/driver.sh" >"$log" 2>&1 </dev/null &
    pid=$!
    setsid nohup "$py" "$root/bench/compile_job_memory.py" --pid "$pid" --out "$base/compile_memory.json" \
        >"$base/compile_memory.log" 2>&1 </dev/null &
    echo "started at $(date -u +%FT%TZ) (pid $pid); cuDNN from the machine: ${cudnn:-unknown}" | tee "$base/started"
    sleep 20
    tail -c 1500 "$log"
    ;;
watch)
    end=$(($(t0) + ${2:-60}))
    prev_n="" prev_t=""
    while [ "$(t0)" -lt "$end" ]; do
        step=$(find "$base/work" -path '*logs/build_*.log' -newer "$base/started" \
            -exec grep -hoa '\[[0-9]*/[0-9]*\]' {} + 2>/dev/null | tail -1 || true)
        n=${step#[}; n=${n%%/*}; now=$(t0) rate=""
        if [ -n "$prev_n" ] && [ -n "$n" ] && [ "$n" -ge "$prev_n" ]; then
            rate="$(((n - prev_n) * 60 / (now - prev_t))) steps/min"
        fi
        prev_n=$n prev_t=$now
        echo "$(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) ninja ${step:-none} ${rate} | $(tail -c 140 "$log" | tr '\n' ' ')"
        grep -q '^pytorch exit ' "$log" && { echo "driver ended"; break; }
        sleep 30
    done
    cat "$base/started"
    # What comes back is bounded (8 files, 16 MiB each): the driver's log, one tar of the small
    # results (CMake's summary, the report, compile memory, the channel's index, the GPU checks, the
    # tests' junit and log, the failures list), the logs' tails in one tar, ninja -k 0's log, and a
    # built magma in two pieces (19.9 MiB) for a later hold's pack (MAGMA_PACKAGE=...).
    mkdir -p "$out" "$base/logs-out" "$base/results-out" "$base/results"
    tail -c 4000000 "$log" >"$out/driver.log" 2>/dev/null || true
    rm -rf "$base"/results-out/* "$base"/logs-out/*
    grep -ah -A90 '\*\*\*\*\*\*\*\* Summary \*\*\*\*\*\*\*\*' "$base"/work/logs/*.log 2>/dev/null | tail -90 >"$base/results-out/cmake-summary.txt" || true
    for f in "$base/work/report.json" "$base/compile_memory.json" "$base/machine.txt" "$base/cuda-wheels.txt"; do
        cp "$f" "$base/results-out/" 2>/dev/null || true
    done
    cp "$base/channel/linux-64/repodata.json" "$base/results-out/channel-repodata.json" 2>/dev/null || true
    ls -la "$base"/channel/linux-64 >"$base/results-out/channel-ls.txt" 2>/dev/null || true
    find "$base/results" -maxdepth 1 -type f ! -name 'ninja-k0.log.xz' -exec cp {} "$base/results-out/" \;
    (cd "$base/results-out" && tar -cf - . | xz -6 -T0 >"$out/results.tar.xz") || true
    cp "$base/results/ninja-k0.log.xz" "$out/" 2>/dev/null || true
    tail -c 30000000 "$magma_log" >"$base/logs-out/magma.log" 2>/dev/null || true
    find "$base/work" "$base/work-magma" -path '*logs/*.log' -newer "$base/started" \
        -exec sh -c 'tail -c 40000000 "$1" >"$2/$(basename "$1")"' _ {} "$base/logs-out" \; 2>/dev/null || true
    (cd "$base/logs-out" && tar -cf - . | xz -6 -T0 >"$base/logs.tar.xz") || true
    if [ "$(stat -c %s "$base/logs.tar.xz" 2>/dev/null || echo 0)" -lt $((15 * 1024 * 1024)) ]; then
        cp "$base/logs.tar.xz" "$out/"
    fi
    for m in "$base"/channel/linux-64/magma-cuda130-*.conda; do
        [ -f "$m" ] || continue
        split -b 15M -d "$m" "$out/magma-cuda130.conda.part"
        echo "$(sha256sum "$m" | cut -d' ' -f1) $(basename "$m")" >>"$out/driver.log"
    done
    ls -la "$base/channel/linux-64" 2>/dev/null || true
    for f in failures.txt gpu-checks.txt; do
        [ -f "$base/results/$f" ] && { echo "== $f"; tail -c 2500 "$base/results/$f"; }
    done
    [ -f "$base/results/pytorch-cuda-tests.log" ] && { echo "== tests"; tail -3 "$base/results/pytorch-cuda-tests.log"; cat "$base/results/test-counts.txt" 2>/dev/null; }
    true
    ;;
failures)  # the build's own tree, every remaining object with `ninja -k 0`; each failure's first error
    bdir=$(dirname "$(find "$base/work" -name build.ninja -path '*/build/build.ninja' | head -1)")
    [ -f "$bdir/build.ninja" ] || { echo "no build.ninja left under $base/work" >&2; exit 1; }
    s=$(t0)
    PATH="$base/site/bin:$PATH" timeout -s INT "${2:-540}" ninja -C "$bdir" -k 0 -j "$(nproc)" >"$base/ninja-k0.log" 2>&1 || true
    grep -a '^FAILED: ' "$base/ninja-k0.log" | sed 's/^FAILED: //' | sort -u | while read -r obj _; do
        echo "$obj"
        grep -a -A400 "^FAILED: $obj" "$base/ninja-k0.log" | grep -a -m2 'error' | sed 's/^/    /'
    done | tee "$out/failures.txt"
    echo "failed objects: $(grep -ac '^FAILED: ' "$base/ninja-k0.log" || true); last step: $(grep -ao '^\[[0-9]*/[0-9]*\]' "$base/ninja-k0.log" | tail -1); $(($(t0) - s)) s" | tee -a "$out/failures.txt"
    tail -c 60000000 "$base/ninja-k0.log" | xz -6 -T0 >"$out/ninja-k0.log.xz"
    ;;
env)  # a fresh environment from the channels, as a user installs the package, and the GPU checks
    site_env
    rm -rf "$base/fresh"
    "$py" "$root/scripts/fresh_env.py" "$base/fresh" --channel "${ENV_CHANNEL:-$base/channel}" --channel "$base/host-channel" \
        --channel "$base/cuda-channel" --channel "$base/standin-channel" pytorch | tee "$out/fresh-env.txt"
    cd /tmp
    env -u PYTHONPATH -u LD_LIBRARY_PATH "$base/fresh/bin/python" - <<'PY' 2>&1 | tee "$out/gpu-checks.txt"
import torch
print("torch", torch.__version__, torch.__file__)
print("torch.version.cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("torch.cuda.is_available()", torch.cuda.is_available(), "devices", torch.cuda.device_count())
print("torch.cuda.get_arch_list()", torch.cuda.get_arch_list())
print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
a = torch.randn(512, 512, device="cuda", dtype=torch.float64)
print("linalg.solve (magma/cusolver) residual", float((a @ torch.linalg.solve(a, a) - a).abs().max()))
print("nccl", torch.cuda.nccl.version())
x = torch.randn(8, 3, 32, 32, device="cuda")
print("cudnn conv", tuple(torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3, device="cuda")).shape))
print("nonzero/unique/topk/sort", torch.tensor([0, 3, 0, 5], device="cuda").nonzero().flatten().tolist(),
      torch.tensor([3, 1, 3], device="cuda").unique().tolist(), torch.arange(10, device="cuda").topk(3).values.tolist(),
      torch.tensor([3.0, 1.0, 2.0], device="cuda").sort().values.tolist())
print(torch.__config__.show())
PY
    for f in "$base"/fresh/lib/python3.12/site-packages/torch/lib/*.so*; do
        readelf -d "$f" | grep -o 'NEEDED.*\[.*\]' | sed "s|^|$(basename "$f") |"
    done | sort -u | grep -v 'libtorch\|libc10\|libshm' | tee "$out/needed.txt" || true
    ;;
hold-end)  # the hold's end in epoch seconds (torchvision's start40 asks)
    hold_end
    ;;
spare)  # after a failed magma build (its package test: GPU solve and SVD checks), the carried spare
    # magma-cuda130 (pack's MAGMA_SPARE) as a channel: prints its -c arguments, says why on stderr;
    # nothing when magma built (or came from an earlier hold: "magma from ...")
    if ! grep -q '^magma exit [1-9]' "$base/magma.done" 2>/dev/null || ! ls "$stage13"/spare-magma-cuda130-*.conda >/dev/null 2>&1; then
        exit 0
    fi
    mkdir -p "$base/magma-spare/linux-64" "$base/magma-spare/noarch"
    for f in "$stage13"/spare-magma-cuda130-*.conda; do cp "$f" "$base/magma-spare/linux-64/${f##*/spare-}"; done
    site_env
    condapipe index "$base/magma-spare" >/dev/null
    echo "this hold's magma build failed ($(cat "$base/magma.done")): the earlier hold's package is used; magma.log says why" |
        tee -a "$base/machine.txt" >&2
    echo "-c $base/magma-spare"
    ;;
svd)  # every CUDA SVD path against the CPU, test_svd's own loop replayed, then test_svd alone
    cd /tmp
    mkdir -p "$out"
    env -u PYTHONPATH -u LD_LIBRARY_PATH timeout 600 "$base/fresh/bin/python" "$root/scripts/pytorch_svd_backends_check.py" \
        2>&1 | tee "$out/svd-paths.txt" | grep -v '^path .*: ok$' || true
    # test_svd alone, outside the 16 workers' mix of the second hold's run
    test_site
    (cd "$base/src/test" && PYTHONPATH=$base/testsite timeout 300 env -u LD_LIBRARY_PATH "$base/fresh/bin/python" \
        -m pytest --noconftest -p no:cacheprovider -q -o addopts= test_linalg.py -k "test_svd_cuda" \
        --junitxml="$out/test-svd-alone.xml" >"$out/test-svd-alone.log" 2>&1) || true
    tail -3 "$out/test-svd-alone.log"
    ;;
bring)  # the built pytorch package back in 15 MiB pieces, 4 a call (64 MiB comes back a call): `bring 0`, `bring 1`, ... (cat in order)
    pkg=$(ls "$base"/channel/linux-64/pytorch-*.conda | head -1)
    mkdir -p "$base/pieces" "$out"
    [ -f "$base/pieces/done" ] || { split -b 15M -d -a 3 "$pkg" "$base/pieces/$(basename "$pkg").part" && touch "$base/pieces/done"; }
    first=$((${2:-0} * 4))
    find "$base/pieces" -name '*.part*' | sort | tail -n +$((first + 1)) | head -4 | xargs -r cp -t "$out"
    echo "$(sha256sum "$pkg" | cut -d' ' -f1) $(basename "$pkg") $(stat -c %s "$pkg") bytes, $(find "$base/pieces" -name '*.part*' | wc -l) pieces" | tee "$out/package-sha256.txt"
    ;;
tests)  # 2.6.0's own tests on the GPU, cut at SECONDS; counts from the junit files
    budget=${2:-420}
    src=$base/src/test
    test_site
    cd "$src"
    mkdir -p "$out"
    s=$(t0)
    set +e
    # test_cuda.py (its classes are TestCuda*) and test_linalg.py / test_torch.py instantiated for the
    # cuda device (-k cuda: pytest matches names case-insensitively); 16 workers, all on cuda:0
    PYTHONPATH=$base/testsite timeout -s INT -k 30 "$budget" env -u LD_LIBRARY_PATH "$base/fresh/bin/python" \
        -m pytest --noconftest -p no:cacheprovider -n 16 -q -o addopts= test_cuda.py \
        test_linalg.py test_torch.py -k cuda --junitxml="$out/pytorch-cuda-tests.xml" \
        >"$out/pytorch-cuda-tests.log" 2>&1
    rc=$?
    set -e
    echo "pytest exit $rc after $(($(t0) - s)) s"
    tail -5 "$out/pytorch-cuda-tests.log"
    "$py" - "$out/pytorch-cuda-tests.xml" <<'PY' | tee "$out/test-counts.txt" || true
import sys, xml.etree.ElementTree as ET
from collections import Counter
per = {}
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    f = (case.get("file") or case.get("classname", "").split(".")[0]) + ""
    c = per.setdefault(f.split(".")[0], Counter())
    kind = next((k.tag for k in case if k.tag in ("failure", "error", "skipped")), "passed")
    c[kind] += 1
for f, c in sorted(per.items()):
    print(f, dict(c))
PY
    ;;
*)
    echo "usage: $0 pack|stash|setup|start|watch SECONDS|failures [SECONDS]|env|tests SECONDS|svd|bring K" >&2
    exit 2
    ;;
esac

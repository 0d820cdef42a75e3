#!/usr/bin/env bash
# Issue 40 on the lent 64-core GPU machine, in the same hold as issue 33's torch: one plan,
# `condapipe build pytorch --version 2.6.0 --cuda 13.0 --arch 9.0 --python 3.12 --with torchvision`
# (magma-cuda130 -> pytorch 2.6.0 -> torchvision 0.21.0, rattler-build, offline), then in a fresh
# environment from the channel on the GPU: torch's checks (issue 33's `env`), nms / roi_align /
# deform_conv2d on cuda vs the CPU and decode_jpeg(device="cuda") (scripts/torchvision_gpu_checks.py),
# the fatbins of torchvision's _C.so / image.so (cuobjdump --list-elf, and condapipe's own reader),
# and torchvision 0.21.0's test/test_ops.py on cuda (junit counts), before 33's tests.
#
# Everything of issue 33's run is reused: scripts/pytorch_cuda13_package_device.sh's carry, stash,
# early (condapipe installed, magma started), setup (tree, channels, stand-ins), watch and failures;
# this script adds one carried part and its own setup, driver, env and tests. What the part holds
# (.gpu/carry40/part00, ~25 MiB; scripts/torchvision_cuda13_results.md says why each):
#   - pytorch-vision_0.21.0.orig.tar.gz: Debian trixie's orig tarball of 0.21.0 (upstream files,
#     test/ included), the companion's source through the config file's [packages.torchvision]
#     source (the device has no network, the family's source is git);
#   - nvidia-nvjpeg 13.x: made into libnvjpeg / libnvjpeg-dev by `condapipe wheels` (the machine's
#     python has no nvjpeg wheel; the recipe's host asks for libnvjpeg-dev);
#   - pillow (torchvision's run requirement; not among 33's host wheels);
#   - bookworm's libpng / libjpeg-turbo / libwebp .debs, laid out as conda-forge's libpng,
#     libjpeg-turbo and libwebp-base (tests/debian_lib_packages.py, as the CPU e2e run does).
#
# Calls (each a device call; the machine goes back 30 s after a command ends):
#   here:   scripts/pytorch_cuda13_package_device.sh pack && scripts/torchvision_cuda13_device.sh pack
#   device: (P=scripts/pytorch_cuda13_package_device.sh V=scripts/torchvision_cuda13_device.sh)
#           33's calls as its header lists them, up to (not including) its last one;
#           one more call, carry [.gpu/carry40/part00, .gpu/carry-spare]:   $P stash && $V stash40
#           (carry-spare: 33's pack with MAGMA_SPARE=an earlier hold's magma-cuda130, used only if
#           this hold's magma build fails)
#           33's last call, its last carry folder:  $P stash && LIFT_CUDA13_REFUSAL=1 $P setup &&
#                                                   $V setup40 && $V start40
#           $P watch SECONDS (repeat: 33's watch reads the same driver log and results folder)
#   start40 replaces 33's `start`: its driver runs the one plan above, then by itself after success
#   33's `env` and `svd`, `env40` and `tests40` here, then 33's `tests` with the time left (each cut 2 min
#   before HOLD_END / HOLD_LEFT); after a failure 33's `failures`, and torchvision's log tail.
# BASE (default /root), PYTHON (default python3) as in 33's script. FRESH_PYTHON stands in for the
# fresh environment's python (rehearsals here: a CPU-only torch; say so in the results).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
base=${BASE:-/root}
stage40=$base/stage-40
out=${OUT:-$base/out}
log=$base/build.log
carry40=$root/.gpu/carry40
dl40=$root/.gpu/dl40
part_bytes=$((58 * 1024 * 1024))
p33=$root/scripts/pytorch_cuda13_package_device.sh
vision_version=0.21.0
torch_version=2.6.0
export PYTHONUNBUFFERED=1
t0() { date +%s; }
site_env() { export PYTHONPATH=$base/site PATH=$base/site/bin:$PATH; }
dev33() { OUT=$out BASE=$base PYTHON=$py bash "$p33" "$@"; }
debs="libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo libwebp-dev libwebp7 libwebpdemux2 libwebpmux3"

case "${1:-}" in
pack)  # here: fetch (once, into .gpu/dl40) and lay out the part this issue adds
    mkdir -p "$dl40/debs" "$dl40/wheels"
    if ! ls "$dl40"/pytorch-vision_${vision_version}.orig.tar.gz >/dev/null 2>&1; then
        # Debian trixie's source package; only the orig tarball (upstream files) is used
        (cd "$dl40" && apt-get source --download-only "pytorch-vision=${vision_version}-3" >/dev/null 2>&1 || true)
        [ -f "$dl40/pytorch-vision_${vision_version}.orig.tar.gz" ] || { echo "no pytorch-vision_${vision_version}.orig.tar.gz (apt-get source)" >&2; exit 1; }
    fi
    # shellcheck disable=SC2086
    (cd "$dl40/debs" && ls ./*.deb >/dev/null 2>&1 || apt-get download $(printf "%s/bookworm " $debs) >/dev/null)
    for spec in "nvidia-nvjpeg==${NVJPEG_VERSION:-13.3.2.43}" "pillow==${PILLOW_VERSION:-13.0.0}"; do
        name=${spec%%==*}
        ls "$dl40/wheels/${name//-/_}"-*.whl >/dev/null 2>&1 && continue
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -d "$dl40/wheels" "$spec"
    done
    rm -rf "$carry40.tmp" && mkdir -p "$carry40.tmp/part00"
    cp "$dl40/pytorch-vision_${vision_version}.orig.tar.gz" "$dl40"/wheels/*.whl "$dl40"/debs/*.deb "$carry40.tmp/part00/"
    (cd "$carry40.tmp/part00" && sha256sum ./* | sed 's|\./||') >"$carry40.tmp/MANIFEST-40.txt"
    mv "$carry40.tmp/MANIFEST-40.txt" "$carry40.tmp/part00/"
    size=$(du -sb "$carry40.tmp/part00" | cut -f1)
    [ "$size" -le "$part_bytes" ] || { echo "the part is $size bytes, over $part_bytes" >&2; exit 1; }
    rm -rf "$carry40" && mv "$carry40.tmp" "$carry40"
    ls -la "$carry40/part00"
    echo "part: $size bytes; carry [.gpu/carry40/part00] once, with any call before setup40"
    ;;
stash40)  # the carried part goes where the next call's tree copy will not remove it
    [ -d "$carry40/part00" ] || { echo "no $carry40/part00 in this call's carry" >&2; exit 1; }
    mkdir -p "$stage40" && cp -a "$carry40"/part00/. "$stage40"/
    (cd "$stage40" && sha256sum -c --quiet MANIFEST-40.txt) && du -sh "$stage40"
    ;;
setup40)  # after 33's setup: nvJPEG, pillow and the image libraries into the channels; the config
    s=$(t0)
    site_env
    mkdir -p "$out"
    (cd "$stage40" && sha256sum -c --quiet MANIFEST-40.txt)
    # nvJPEG beside 33's CUDA packages, pillow beside its host wheels (added, then re-indexed)
    condapipe wheels --no-python "$stage40"/nvidia_nvjpeg-*.whl --to "$base/cuda-channel" | tail -1
    condapipe wheels --no-python "$stage40"/pillow-*.whl --to "$base/host-channel" | tail -1
    rm -rf "$base/vision-channel" && mkdir -p "$base/vision-channel/linux-64" "$base/vision-channel/noarch"
    PYTHONPATH="$base/site:$root/tests" "$py" - "$stage40" "$base/vision-channel/linux-64" <<'PY'
import pathlib, re, subprocess, sys
from debian_lib_packages import deb_conda_package
stage, subdir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for name, pattern in (("libpng", "libpng*.deb"), ("libjpeg-turbo", "libjpeg62-turbo*.deb"), ("libwebp-base", "libwebp*.deb")):
    found = sorted(stage.glob(pattern))
    version = subprocess.run(["dpkg-deb", "-f", str(found[0]), "Version"], capture_output=True, text=True, check=True).stdout
    version = re.match(r"(?:\d+:)?([0-9.]+)", version.strip()).group(1)
    print(deb_conda_package(name, version, found, subdir).name)
PY
    condapipe index "$base/vision-channel" >/dev/null
    # the companion's source: the release tarball (condapipe hands the engine a file:// URL + sha256)
    printf '[packages.torchvision]\nsource = "%s"\n' "$(ls "$stage40"/pytorch-vision_${vision_version}.orig.tar.gz)" >"$base/condapipe-40.toml"
    cat "$base/condapipe-40.toml"
    echo "setup40 took $(($(t0) - s)) s" | tee -a "$base/machine.txt"
    ;;
start40)  # the one plan, detached; the driver goes on by itself (33's watch follows it)
    site_env
    cd "$base"
    tr=$(dirname "$(find "$base/src" -maxdepth 2 -name version.txt | head -1)")
    cudnn=$(sed -n 's/^nvidia_cudnn_cu13-\([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' "$base/cuda-wheels.txt" | head -1)
    channels=(-c "$base/host-channel" -c "$base/cuda-channel" -c "$base/standin-channel" -c "$base/vision-channel")
    hold_end=$(dev33 hold-end)
    echo "hold ends $(date -u -d "@$hold_end" +%T) (in $((hold_end - $(t0))) s)"
    magma_channel=$(cat "$base/magma-channel.txt" 2>/dev/null || true)
    if [ -n "$magma_channel" ]; then channels+=(-c "$magma_channel"); fi
    cat >"$base/driver.sh" <<EOF
#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH=$base/site PATH=$base/site/bin:\$PATH PYTHONUNBUFFERED=1
cd $base
while [ ! -f $base/magma.done ]; do sleep 5; done
cat $base/magma.done
spare=\$(OUT=$base/results BASE=$base PYTHON=$py bash $base/condapipe-src/scripts/pytorch_cuda13_package_device.sh spare)
echo "pytorch started \$(date -u +%FT%TZ) (with torchvision)"
condapipe build pytorch --version $torch_version --python 3.12 --cuda 13.0 --arch 9.0 ${cudnn:+--cudnn $cudnn} \\
    --source "$tr" --with torchvision --config $base/condapipe-40.toml --engine rattler-build --build-tools wheels \\
    ${channels[*]} \$spare --override-channels ${COMPILE_CACHE:+--compile-cache $COMPILE_CACHE} \\
    --output-dir $base/channel --work-dir $base/work
rc=\$?
echo "pytorch exit \$rc \$(date -u +%FT%TZ)"
left() { l=\$(($hold_end - \$(date +%s) - 120)); [ \$l -gt 60 ] && echo \$l || echo 60; }
dev() { OUT=$base/results BASE=$base PYTHON=$py bash $base/condapipe-src/scripts/pytorch_cuda13_package_device.sh "\$@"; }
dev40() { OUT=$base/results BASE=$base PYTHON=$py bash $base/condapipe-src/scripts/torchvision_cuda13_device.sh "\$@"; }
mkdir -p $base/results
ls $base/channel/linux-64/ | tee $base/results/channel-40.txt
if ls $base/channel/linux-64/pytorch-$torch_version-*.conda >/dev/null 2>&1; then
    dev env
    dev svd  # issue 33: which CUDA SVD path 2.6.0's test_svd caught (scripts/pytorch_svd_backends_check.py)
    if ls $base/channel/linux-64/torchvision-$vision_version-*.conda >/dev/null 2>&1; then
        dev40 env40
        dev40 tests40 \$(( \$(left) / 2 ))
    else
        echo "no torchvision package: its build log's tail" | tee $base/results/torchvision-failure.txt
        find $base/work -path '*logs/*torchvision*' -name '*.log' -exec tail -c 20000 {} + >>$base/results/torchvision-failure.txt 2>/dev/null
    fi
    dev tests \$(left)
else
    dev failures \$(left)
fi
echo "driver done \$(date -u +%FT%TZ)"
EOF
    chmod +x "$base/driver.sh"
    setsid nohup "$base/driver.sh" >"$log" 2>&1 </dev/null &
    pid=$!
    # compile-job memory, as 33's start measures it (watch brings compile_memory.json back)
    setsid nohup "$py" "$root/bench/compile_job_memory.py" --pid "$pid" --out "$base/compile_memory.json" \
        >"$base/compile_memory.log" 2>&1 </dev/null &
    echo "started at $(date -u +%FT%TZ) (pid $pid); cuDNN from the machine: ${cudnn:-unknown}" | tee "$base/started"
    sleep 20
    tail -c 1500 "$log"
    ;;
env40)  # a fresh environment from the channels with torchvision; the GPU checks and the fatbins
    site_env
    fresh=$base/fresh40
    if [ -z "${FRESH_PYTHON:-}" ]; then
        rm -rf "$fresh"
        "$py" "$root/scripts/fresh_env.py" "$fresh" --channel "$base/channel" --channel "$base/host-channel" \
            --channel "$base/cuda-channel" --channel "$base/standin-channel" --channel "$base/vision-channel" \
            "torchvision ==$vision_version" | tee "$out/fresh-env-40.txt"
        FRESH_PYTHON=$fresh/bin/python
    fi
    mkdir -p "$out"
    set +e
    (cd /tmp && env -u PYTHONPATH -u LD_LIBRARY_PATH "$FRESH_PYTHON" -X faulthandler "$root/scripts/torchvision_gpu_checks.py" \
        "$vision_version" "$torch_version") >"$out/torchvision-gpu-checks.txt" 2>&1
    checks=$?
    echo "torchvision_gpu_checks exit $checks" >>"$out/torchvision-gpu-checks.txt"
    set -e
    cat "$out/torchvision-gpu-checks.txt"
    pkg=$(env -u PYTHONPATH "$FRESH_PYTHON" -c 'import os, torchvision; print(os.path.dirname(torchvision.__file__))')
    {
        for so in "$pkg"/_C*.so "$pkg"/image*.so; do
            echo "== $(basename "$so")"
            if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda-13.0/bin/cuobjdump ]; then
                "$(command -v cuobjdump || echo /usr/local/cuda-13.0/bin/cuobjdump)" --list-elf "$so" 2>&1 | head -20
            else
                echo "(no cuobjdump on this machine)"
            fi
            "$py" -c 'import sys
from condapipe.elf.fatbin import read_fatbin
report = read_fatbin(sys.argv[1])
names = {1: "compute_{}", 2: "sm_{}"}
print("condapipe fatbin reader:", sorted({names[e.kind].format(e.arch) for e in report.entries}) or "no fatbin")' "$so"
            readelf -d "$so" | grep -E 'NEEDED|RUNPATH' | grep -E 'nvjpeg|cudart|RUNPATH' || true
        done
    } 2>&1 | tee "$out/torchvision-fatbins.txt"
    exit "$checks"  # 0 all matched, 1 one differed, 2 no GPU (scripts/torchvision_gpu_checks.py)
    ;;
tests40)  # torchvision 0.21.0's own test/test_ops.py on cuda in the fresh environment; junit counts
    budget=${2:-300}
    FRESH_PYTHON=${FRESH_PYTHON:-$base/fresh40/bin/python}
    src=$base/vision-tests
    rm -rf "$src" && mkdir -p "$src"
    tar -xzf "$stage40"/pytorch-vision_${vision_version}.orig.tar.gz -C "$src" --strip-components=1 --wildcards '*/test/*'
    testsite=${TESTSITE:-$base/testsite40}
    if [ -z "${TESTSITE:-}" ]; then  # the same test tools 33's tests install, from its host wheels
        rm -rf "$testsite"
        files=$base/files/host
        "$py" -m pip install -q --no-index --no-deps --no-compile --target "$testsite" \
            "$files"/pytest-*.whl "$files"/pluggy-*.whl "$files"/iniconfig-*.whl "$files"/packaging-*.whl \
            "$files"/hypothesis-*.whl "$files"/attrs-*.whl "$files"/sortedcontainers-*.whl "$files"/expecttest-*.whl \
            "$files"/pytest_xdist-*.whl "$files"/execnet-*.whl "$files"/psutil-*.whl
    fi
    mkdir -p "$out"
    cd "$src/test"
    s=$(t0)
    set +e
    # the cases parametrized on cuda (cpu_and_cuda / needs_cuda: the `needs_cuda` marker), 8 workers
    PYTHONPATH=$testsite timeout -s INT -k 30 "$budget" env -u LD_LIBRARY_PATH "$FRESH_PYTHON" -m pytest \
        -p no:cacheprovider -n "${TEST_WORKERS:-8}" -q -o addopts= -m needs_cuda test_ops.py \
        --junitxml="$out/torchvision-test-ops.xml" >"$out/torchvision-test-ops.log" 2>&1
    rc=$?
    set -e
    echo "pytest exit $rc after $(($(t0) - s)) s"
    tail -3 "$out/torchvision-test-ops.log"
    "$py" - "$out/torchvision-test-ops.xml" <<'PY' | tee "$out/torchvision-test-counts.txt"
import sys, xml.etree.ElementTree as ET
from collections import Counter
counts, reasons = Counter(), Counter()
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    kind = next((k.tag for k in case if k.tag in ("failure", "error", "skipped")), "passed")
    counts[kind] += 1
    if kind == "skipped":
        reasons[next(k for k in case if k.tag == "skipped").get("message", "")[:90]] += 1
print("test_ops.py -m needs_cuda:", dict(counts))
for reason, n in reasons.most_common(5):
    print(f"  skipped {n}: {reason}")
PY
    ;;
*)
    echo "usage: $0 pack|stash40|setup40|start40|env40|tests40 [SECONDS]" >&2
    exit 2
    ;;
esac

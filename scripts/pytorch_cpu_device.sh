#!/usr/bin/env bash
# A real PyTorch CPU package through condapipe on the lent many-core machine (no network), in
# consecutive commands while the machine stays warm, with doctor's own MAX_JOBS. What travels is at
# most 64 MiB a call, so the files come in parts (.gpu/carry/partNN, listed in .gpu/carry/MANIFEST.txt)
# that `stash` moves aside; `setup` joins them, installs condapipe, unpacks the tree and PyTorch's
# tests and makes the host channel (PyPI wheels via `condapipe wheels`) and the stand-in channel
# (conda-forge's libgomp, from the machine's gcc); `start` launches the build detached (setsid: it
# outlives the command) beside a compile-memory sampler; `watch N` reports progress for N seconds
# and copies the logs to $OUT; `env` makes a fresh environment from the channel and imports torch;
# `tests N` runs PyTorch's own test files of the same release against it for at most N seconds.
#
# usage: scripts/pytorch_cpu_device.sh stash|setup|start|watch SECONDS|env|tests SECONDS|baseline|watch-baseline SECONDS
# Files: see scripts/pytorch_cpu_device_results.md (made here with scripts/pytorch_tree/ and
# `pip download`).
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
    if [ -f "$root/.gpu/rezip_wheel.py" ]; then cp "$root/.gpu/rezip_wheel.py" "$stage/"; fi
    du -sh "$stage"
    ;;
setup)
    s=$(t0)
    mkdir -p /root/files
    # Join the parts: every file of the manifest (sha256 size kind name part/piece...), checked.
    "$py" - "$stage" /root/files <<'PY'
import hashlib, pathlib, sys
stage, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
count = 0
for line in (stage / "MANIFEST.txt").read_text().splitlines():
    if not line.strip() or line.startswith("#"):
        continue
    sha, size, kind, name, *parts = line.split()
    out = dest / kind / name
    out.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(out, "wb") as fh:
        for part in parts:
            data = (stage / part).read_bytes()
            h.update(data)
            fh.write(data)
    if h.hexdigest() != sha or out.stat().st_size != int(size):
        sys.exit(f"{name}: sha256 or size mismatch ({len(parts)} parts)")
    count += 1
print("joined", count, "files")
PY
    # condapipe's wheel is built with the site wheels' setuptools (not the machine's), then everything
    # goes into /root/site in one install (a second --target install would replace its bin/).
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/build-site \
        /root/files/site/setuptools-*.whl
    PYTHONPATH=/root/build-site "$py" -m pip wheel -q --no-index --no-deps --no-build-isolation -w /root/cpwheel "$root"
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/site \
        /root/files/site/*.whl /root/cpwheel/condapipe-*.whl
    condapipe --version
    # A wheel that travelled as its recompressed contents is zipped again under the name the
    # manifest's NOTE gives, every file checked against its RECORD (zstandard from /root/site).
    grep -o 'rezip_wheel.py [^ ]*\.contents\.tar\.zst [^ ]*\.whl' "$stage/MANIFEST.txt" | while read -r _ tarname whl; do
        t="/root/files/host/$tarname"
        "$py" "$stage/rezip_wheel.py" "$t" "/root/files/host/$whl"
        rm -f "$t"
    done
    find /root/files/host -name "*.whl" | wc -l
    mkdir -p /root/src
    for t in /root/files/tree/*.tar.zst /root/files/test/*.tar.zst; do
        "$py" -c 'import sys, tarfile, zstandard
with open(sys.argv[1], "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as z, tarfile.open(fileobj=z, mode="r|") as t:
    t.extractall(sys.argv[2], filter="data")' "$t" /root/src
    done
    ls /root/src
    condapipe wheels /root/files/host --to /root/host-channel
    "$root/scripts/standins/libgomp_recipe.sh" /root/standin/libgomp
    (cd /root && condapipe build /root/standin/libgomp --engine rattler-build --output-dir /root/standin-channel \
        --work-dir /root/work-standin | tail -3)
    echo "setup took $(( $(t0) - s )) s"
    ;;
start)
    cd /root
    tree=$(dirname "$(find /root/src -maxdepth 2 -name version.txt | head -1)")
    # No MAX_JOBS: doctor's own choice is what this run measures.
    setsid nohup condapipe build pytorch --version 2.6.0 --python 3.12 --cuda cpu \
        --source "$tree" --engine rattler-build --build-tools wheels \
        -c /root/host-channel -c /root/standin-channel --override-channels \
        --output-dir /root/channel --work-dir /root/work \
        >"$log" 2>&1 </dev/null &
    pid=$!
    setsid nohup "$py" "$root/bench/compile_job_memory.py" --pid "$pid" --out /root/compile_memory.json \
        >/root/compile_memory.log 2>&1 </dev/null &
    echo "started at $(date -u +%FT%TZ) (pid $pid)" | tee /root/started
    sleep 25; tail -c 2000 "$log"
    ;;
watch)
    end=$(( $(t0) + ${2:-60} ))
    while [ "$(t0)" -lt "$end" ]; do
        step=$(find /root/work -path '*logs/*.log' -exec grep -hoa '\[[0-9]*/[0-9]*\]' {} + 2>/dev/null | tail -1 || true)
        echo "$(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) ninja ${step:-none} | $(tail -c 160 "$log" | tr '\n' ' ')"
        pgrep -f "condapipe build pytorch" >/dev/null || { echo "build process ended"; break; }
        sleep 30
    done
    cat /root/started
    mkdir -p "$OUT"
    cp "$log" "$OUT/condapipe-build.log" || true
    cp /root/compile_memory.json "$OUT/" 2>/dev/null || true
    cp /root/work/report.json "$OUT/" 2>/dev/null || true
    find /root/work -path '*logs/*.log' -newer /root/started -exec sh -c 'tail -c 12000000 "$1" >"$2/$(basename "$1")"' _ {} "$OUT" \; || true
    grep -a -A80 "\*\*\*\*\*\*\*\* Summary \*\*\*\*\*\*\*\*" /root/work/logs/*.log | tail -80 >"$OUT/cmake-summary.txt" || true
    ls -la /root/channel/linux-64 2>/dev/null || true
    cp /root/channel/linux-64/repodata.json "$OUT/channel-repodata.json" 2>/dev/null || true
    ;;
env)
    rm -rf /root/fresh
    "$py" "$root/scripts/fresh_env.py" /root/fresh --channel /root/channel --channel /root/host-channel \
        --channel /root/standin-channel pytorch | tee /root/fresh-env.txt
    cd /tmp
    /root/fresh/bin/python -c 'import torch, numpy; print(torch.__version__, torch.__file__); print(torch.__config__.show()); print(torch.from_numpy(numpy.arange(6.0)).sum().item()); print("parallel:", torch.__config__.parallel_info())'
    for f in /root/fresh/lib/python3.12/site-packages/torch/lib/*.so*; do
        readelf -d "$f" | grep -o 'NEEDED.*\[.*\]' | sed "s|^|$(basename "$f") |"
    done | sort -u | grep -v 'libtorch\|libc10\|libshm' || true
    ;;
tests)
    budget=${2:-300}
    src=/root/src/test  # the orig tarball's whole test/ (the bundle keeps only its top-level files)
    # The tests run with the fresh environment's python; pytest and its plugins (host wheels) come
    # from a folder of their own, not the machine's python (its triton cannot load under torch 2.6).
    rm -rf /root/testsite
    "$py" -m pip install -q --no-index --no-deps --no-compile --target /root/testsite \
        /root/files/host/pytest-*.whl /root/files/host/pluggy-*.whl /root/files/host/iniconfig-*.whl \
        /root/files/host/packaging-*.whl /root/files/host/hypothesis-*.whl /root/files/host/attrs-*.whl \
        /root/files/host/sortedcontainers-*.whl /root/files/host/expecttest-*.whl \
        /root/files/host/pytest_xdist-*.whl /root/files/host/execnet-*.whl /root/files/host/psutil-*.whl
    cd "$src"
    mkdir -p "$OUT"
    s=$(t0)
    set +e
    PYTHONPATH=/root/testsite timeout -s INT -k 30 "$budget" /root/fresh/bin/python -m pytest --noconftest -p no:cacheprovider \
        -n 60 -q -o addopts= test_torch.py test_linalg.py test_binary_ufuncs.py \
        --junitxml="$OUT/pytorch-tests.xml" >"$OUT/pytorch-tests.log" 2>&1
    rc=$?
    set -e
    echo "pytest exit $rc after $(( $(t0) - s )) s"
    tail -5 "$OUT/pytorch-tests.log"
    ;;
baseline)
    # The bare build a user would run by hand, for the ratio of condapipe's build step to it: a fresh
    # copy of the same tree, an environment of the same host packages from the same host channel,
    # the same knobs condapipe's rendered build.sh exports as literals (USE_*, BLAS, BUILD_TEST,
    # _GLIBCXX_USE_CXX11_ABI, ...), the MAX_JOBS condapipe printed, six for NNPACK (offline), and
    # `python setup.py bdist_wheel`, timed; no compiler cache in either. Detached: `watch-baseline N` reports.
    rm -rf /root/baseline-src /root/baseline-env /root/.baseline-env-pkgs
    mkdir -p /root/baseline-src
    "$py" -c 'import sys, tarfile, zstandard
with open(sys.argv[1], "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as z, tarfile.open(fileobj=z, mode="r|") as t:
    t.extractall(sys.argv[2], filter="data")' /root/files/tree/*.tar.zst /root/baseline-src
    "$py" "$root/scripts/fresh_env.py" /root/baseline-env --channel /root/host-channel \
        "python 3.12.*" "numpy 2.0.1.*" "setuptools >=70.1.0" "typing_extensions >=4.10.0" pyyaml ninja six pip \
        "mkl-devel 2023.1.*" >/root/baseline-env.txt
    tree=$(dirname "$(find /root/baseline-src -maxdepth 2 -name version.txt | head -1)")
    # The knobs and MAX_JOBS of condapipe's build in this hold, or, in a hold of its own (the build
    # measured in an earlier one), condapipe's rendered recipe and doctor's MAX_JOBS for the same spec.
    rendered=$(grep -rlsa --include=build.sh '^export TH_BINARY_BUILD=' /root/work 2>/dev/null | head -1 || true)
    jobs=$(grep -ao 'condapipe: MAX_JOBS=[0-9]*' "$log" 2>/dev/null | head -1 | cut -d= -f2 || true)
    if [ -z "$rendered" ] || [ -z "$jobs" ]; then
        spec=(pytorch --version 2.6.0 --python 3.12 --cuda cpu --source "$tree")
        condapipe render "${spec[@]}" -o /root/baseline-recipe --force >/dev/null
        rendered=/root/baseline-recipe/build.sh
        jobs=$(condapipe doctor "${spec[@]}" 2>&1 | grep -a '^build environment:' | grep -o 'MAX_JOBS=[0-9]*' | head -1 | cut -d= -f2)
    fi
    [ -f "$rendered" ] && [ -n "$jobs" ] || { echo "no rendered pytorch build.sh or MAX_JOBS" >&2; exit 1; }
    cd "$tree"
    setsid nohup "$py" - "$rendered" "$jobs" /root/baseline-env "$tree" >/root/baseline.log 2>&1 <<'PY' &
import os, re, subprocess, sys, time
rendered, jobs, prefix, tree = sys.argv[1:]
env = dict(os.environ)
for name, value in re.findall(r'^export ([A-Z_][A-Z0-9_]*)="([^"$`\\]*)"$', open(rendered).read(), re.M):
    env[name] = value
six = subprocess.run([f"{prefix}/bin/python", "-c", "import os, six; print(os.path.dirname(six.__file__))"],
                     capture_output=True, text=True, check=True).stdout.strip()
# As condapipe's build: six for NNPACK, and no compiler cache (XNNPACK would put the machine's
# ccache, gloo any sccache, in front of every compile), so both builds compile the same way.
with open(f"{tree}/baseline-six.cmake", "w") as fh:
    fh.write(f'set(PYTHON_SIX_SOURCE_DIR "{six}" CACHE STRING "six")\n'
             'set(CCACHE_BINARY OFF CACHE FILEPATH "none")\nset(SCCACHE_EXECUTABLE OFF CACHE FILEPATH "none")\n')
env.update(MAX_JOBS=jobs, USE_CUDA="0", USE_CCACHE="0", CMAKE_PREFIX_PATH=prefix,
           CMAKE_LIBRARY_PATH=f"{prefix}/lib:{prefix}/include", PYTORCH_BUILD_VERSION="2.6.0",
           PYTORCH_BUILD_NUMBER="0", CMAKE_PROJECT_INCLUDE=f"{tree}/baseline-six.cmake",
           CONDA_PREFIX=prefix, PATH=f"{prefix}/bin:" + env["PATH"].replace("/root/site/bin:", ""))
env.pop("PYTHONPATH", None)
print("knobs:", {k: env[k] for k in sorted(env) if k.startswith(("USE_", "BUILD_", "BLAS", "MAX_JOBS", "_GLIBCXX", "CMAKE_", "TH_", "PYTORCH_"))}, flush=True)
start = time.monotonic()
rc = subprocess.call([f"{prefix}/bin/python", "setup.py", "bdist_wheel"], env=env)
print(f"baseline: python setup.py bdist_wheel exit {rc} in {time.monotonic() - start:.1f} s", flush=True)
PY
    echo "baseline started at $(date -u +%FT%TZ), MAX_JOBS=$jobs, knobs from $rendered" | tee /root/baseline-started
    sleep 20; tail -c 1500 /root/baseline.log
    ;;
watch-baseline)
    end=$(( $(t0) + ${2:-60} ))
    while [ "$(t0)" -lt "$end" ]; do
        echo "$(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) | $(grep -ao '\[[0-9]*/[0-9]*\]' /root/baseline.log | tail -1) $(tail -c 120 /root/baseline.log | tr '\n' ' ')"
        grep -q '^baseline: ' /root/baseline.log && break
        sleep 30
    done
    mkdir -p "$OUT"
    grep -a '^knobs:\|^baseline: \|MAX_JOBS\|Summary' /root/baseline.log | tail -20
    tail -c 8000000 /root/baseline.log >"$OUT/baseline.log"
    ls -la "$(dirname "$(find /root/baseline-src -maxdepth 2 -name version.txt | head -1)")"/dist 2>/dev/null || true
    ;;
*)
    echo "usage: $0 stash|setup|start|watch SECONDS|env|tests SECONDS|baseline|watch-baseline SECONDS" >&2
    exit 2
    ;;
esac

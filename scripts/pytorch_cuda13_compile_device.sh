#!/usr/bin/env bash
# The whole-tree proof for issue 33: the real 2.6.0 tree, configured for CUDA 13.0 / sm_90 with the
# catalog's backports applied (`condapipe patches list pytorch --version 2.6.0 --cuda 13.0`), then
# `ninja -k 0` over every torch_cuda object, every failure printed. Run on the lent many-core
# machine (CUDA 13.0 at /usr/local/cuda-13.0, the nvidia-*-cu13 wheels in its python, no network),
# in consecutive commands while it stays warm:
#
#   here:    scripts/pytorch_cuda13_compile_device.sh pack        -> .gpu/carry-cuda13/partNN (<= PART_MIB, 40 MiB each)
#   device:  stash (once per part, carry=.gpu/carry-cuda13/partNN) | setup | configure | compile [all|FILE] | watch S | failures
#
# What travels (pack): the CPU tree bundle (scripts/pytorch_tree/cpu_bundle.py, which leaves out the
# CUDA-only submodules), those submodules (cutlass include+tools, nccl, NVTX, cudnn_frontend), the
# host wheels (numpy, pyyaml, typing_extensions, setuptools, ninja, six) and the ordered patch list;
# the patch files themselves travel with the worktree. About 70 MB, two parts.
# Times measured without the patches on the 64-core kind (issue 33): 465 s for 1655 ninja steps.
# BLAS is Eigen here (MKL's wheels are 254 MB): no torch_cuda object depends on the BLAS choice.
# USE_MAGMA follows MAGMA_HOME (a magma-cuda130 prefix, lib/ + include/); unset, magma is off and
# cuda/linalg/BatchLinearAlgebra.cpp compiles without it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
work=${WORK:-/root/c13}
stage=$work/stage
tree_bundle=${TREE_BUNDLE:-/work/trees/pytorch-2.6.0-cpu.tar.zst}
real_tree=${REAL_TREE:-/work/trees/pytorch-2.6.0}
host_wheels=${HOST_WHEELS:-/work/trees/wheels/host}
carry=$root/.gpu/carry-cuda13
part_bytes=$((${PART_MIB:-40} * 1024 * 1024))  # a call carries <= 64 MiB with the tracked tree (~4 MB)

case "${1:-}" in
pack)
    rm -rf "$carry.tmp" && mkdir -p "$carry.tmp/files"
    cp "$tree_bundle" "$carry.tmp/files/tree.tar.zst"
    (cd "$real_tree/.." && tar --exclude='cutlass/test' --exclude='cutlass/examples' --exclude='cutlass/docs' \
        --exclude='cutlass/media' --exclude='cutlass/python' --exclude='.git' -cf - \
        "$(basename "$real_tree")/third_party/cutlass" "$(basename "$real_tree")/third_party/nccl" \
        "$(basename "$real_tree")/third_party/NVTX" "$(basename "$real_tree")/third_party/cudnn_frontend") |
        zstd -q -19 -T0 -o "$carry.tmp/files/cuda-submodules.tar.zst"
    for w in numpy-2.0.1 PyYAML typing_extensions setuptools ninja six; do
        cp "$host_wheels"/"$w"*.whl "$carry.tmp/files/"
    done
    condapipe patches list pytorch --version 2.6.0 --cuda 13.0 --json |
        "$py" -c 'import json,sys; [print(e["patch_file"].split("/patches/", 1)[1]) for e in json.load(sys.stdin)["entries"] if e.get("patch_file")]' \
        >"$carry.tmp/files/series.txt"
    cat "$carry.tmp/files/series.txt"
    # one stream, cut into parts; MANIFEST lists each file's sha256 and size for setup's check
    (cd "$carry.tmp/files" && sha256sum ./* | sed 's|\./||') >"$carry.tmp/MANIFEST.txt"
    (cd "$carry.tmp/files" && tar -cf - .) | split -b "$part_bytes" -d - "$carry.tmp/part"
    rm -rf "$carry.tmp/files" "$carry" && mv "$carry.tmp" "$carry"
    for p in "$carry"/part*; do mkdir "$p.d" && mv "$p" "$p.d/" && mv "$p.d" "$p"; done
    cp "$carry/MANIFEST.txt" "$carry/part00/"
    du -sh "$carry"/part*
    ;;
stash)  # the carried part (one per call) goes where the next call's tree copy will not remove it
    mkdir -p "$stage" && cp -a "$carry"/part*/. "$stage"/ && ls -la "$stage"
    ;;
setup)
    rm -rf "$work/src" && mkdir -p "$work/files" "$work/src"
    cat "$stage"/part[0-9][0-9] | tar -xf - -C "$work/files"
    (cd "$work/files" && sha256sum -c "$stage/MANIFEST.txt")
    for t in tree.tar.zst cuda-submodules.tar.zst; do (cd "$work/src" && cmake -E tar xf "$work/files/$t"); done  # no zstd binary there
    tree=$(dirname "$(find "$work/src" -maxdepth 2 -name version.txt | head -1)")
    while read -r p; do
        echo "applying $p"
        patch -d "$tree" -p1 --batch --fuzz=0 --no-backup-if-mismatch -i "$root/patches/$p"
    done <"$work/files/series.txt"
    "$py" -m venv "$work/hostpy"
    "$work/hostpy/bin/pip" install -q --no-index "$work"/files/*.whl
    # CUDA root: the toolkit plus the math libraries and cuDNN of the machine's nvidia-*-cu13 wheels
    nv=${NV_SITE:-$("$py" -c 'import nvidia; print(list(nvidia.__path__)[0])')}  # .../site-packages/nvidia
    cuda=$work/cuda && rm -rf "$cuda" && mkdir -p "$cuda/include" "$cuda/lib64/stubs"
    for e in /usr/local/cuda-13.0/*; do case ${e##*/} in include | lib64 | lib) ;; *) ln -s "$e" "$cuda/";; esac; done
    for d in /usr/local/cuda-13.0/include "$nv"/cu13/include "$nv"/cudnn/include; do
        for e in "$d"/*; do [ -e "$cuda/include/${e##*/}" ] || ln -s "$e" "$cuda/include/"; done
    done
    for d in /usr/local/cuda-13.0/lib64 "$nv"/cu13/lib "$nv"/cudnn/lib; do
        for e in "$d"/*; do [ -e "$cuda/lib64/${e##*/}" ] || ln -s "$e" "$cuda/lib64/"; done
    done
    (cd "$cuda/lib64" && for f in *.so.[0-9]*; do b=${f%%.so.*}.so; [ -e "$b" ] || ln -s "$f" "$b"; done)
    ln -s lib64 "$cuda/lib"
    driver=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')  # CMake's CUDA::cuda_driver wants libcuda.so
    if [ -n "$driver" ]; then ln -sf "$driver" "$cuda/lib64/stubs/libcuda.so"; else echo "warning: no libcuda.so.1 (driver)"; fi
    for h in cufft.h cublas_v2.h cusparse.h curand.h cusolverDn.h cudnn.h nvml.h; do
        [ -e "$cuda/include/$h" ] || echo "warning: no $h in the assembled CUDA root"
    done
    echo "$tree" >"$work/tree"
    ;;
configure)  # ARCHS: TORCH_CUDA_ARCH_LIST (default: the table's list for CUDA 13.0, cuda.yaml)
    tree=$(cat "$work/tree") && cuda=$work/cuda
    archs=${ARCHS:-7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX}
    # NCCL as the recipe takes it from CUDA 13 on (the nccl package; here the machine's nvidia-nccl-cu13):
    # the bundled NCCL 2.21.5 does not build with CUDA 13 (cudawrap.h: pfn_cuGetErrorString ... undeclared)
    nv=${NV_SITE:-$("$py" -c 'import nvidia; print(list(nvidia.__path__)[0])')}
    [ -e "$nv/nccl/lib/libnccl.so" ] || ln -sf libnccl.so.2 "$nv/nccl/lib/libnccl.so"
    echo "TORCH_CUDA_ARCH_LIST=$archs"
    cd "$tree"
    s=$(date +%s)
    env PATH="$cuda/bin:$work/hostpy/bin:$PATH" CUDA_HOME="$cuda" CUDA_PATH="$cuda" CUDACXX="$cuda/bin/nvcc" \
        _GLIBCXX_USE_CXX11_ABI=0 USE_CUDA=1 TORCH_CUDA_ARCH_LIST="$archs" USE_CUDNN=1 CUDNN_ROOT_DIR="$cuda" CUDNN_INCLUDE_DIR="$cuda/include" \
        CUDNN_LIBRARY="$cuda/lib64/libcudnn.so" USE_NCCL=1 USE_STATIC_NCCL=0 USE_SYSTEM_NCCL=1 NCCL_INCLUDE_DIR="$nv/nccl/include" NCCL_LIB_DIR="$nv/nccl/lib" \
        USE_MAGMA=$([ -n "${MAGMA_HOME:-}" ] && echo 1 || echo 0) CMAKE_PREFIX_PATH="${MAGMA_HOME:-}" \
        BLAS=Eigen BUILD_TEST=0 USE_MPI=0 USE_NUMA=0 USE_ROCM=0 USE_XPU=0 CMAKE_POLICY_VERSION_MINIMUM=3.5 \
        MAX_JOBS="$(nproc)" "$work/hostpy/bin/python" setup.py build --cmake-only 2>&1 | tee "$work/configure.log" | tail -40
    echo "configure took $(($(date +%s) - s)) s"
    grep -E '^(CUB_INCLUDE_DIR|USE_CUDNN|USE_NCCL|USE_MAGMA|TORCH_CUDA_ARCH_LIST|CUDA_NVCC_EXECUTABLE)[:=]' build/CMakeCache.txt
    ;;
compile)  # detached: it outlives the command; `watch` follows it. `compile all`: every target (libs, torch_python);
    # `compile FILE`: the objects FILE lists (one per line, e.g. an earlier hold's not_finished.txt)
    list=${2:-} && [ -z "$list" ] || [ "$list" = all ] || list=$(realpath -e "$list") || exit 2
    tree=$(cat "$work/tree") && cd "$tree/build"
    if [ "$list" = all ]; then
        echo all >"$work/objects.txt"
    elif [ -n "$list" ]; then
        grep -v '^[[:space:]]*$' "$list" >"$work/objects.txt.tmp" && mv "$work/objects.txt.tmp" "$work/objects.txt"
    else
        ninja -t targets all | grep -E '^(caffe2/CMakeFiles/torch_cuda\.dir|third_party/tensorpipe/tensorpipe/CMakeFiles/tensorpipe_cuda\.dir)/[^:]*\.o: ' |
            cut -d: -f1 | sort -u >"$work/objects.txt"
    fi
    echo "$(wc -l <"$work/objects.txt") targets (torch_cuda and tensorpipe_cuda objects unless 'all' or a list)"
    [ -s "$work/objects.txt" ] || { echo "no objects found in build.ninja" >&2; exit 1; }
    date +%s >"$work/started"
    PATH="$work/cuda/bin:$work/hostpy/bin:$PATH" setsid nohup ninja -k 0 -j "$(nproc)" $(cat "$work/objects.txt") \
        >"$work/ninja.log" 2>&1 </dev/null &
    sleep 20; tail -3 "$work/ninja.log"
    ;;
watch)
    end=$(($(date +%s) + ${2:-60}))
    while [ "$(date +%s)" -lt "$end" ]; do
        echo "$(date -u +%T) $(grep -ao '^\[[0-9]*/[0-9]*\]' "$work/ninja.log" | tail -1) failed=$(grep -c '^FAILED: ' "$work/ninja.log" || true)"
        pgrep -x ninja >/dev/null || { echo "ninja ended after $(($(date +%s) - $(cat "$work/started"))) s"; break; }
        sleep 30
    done
    ;;
failures)  # every failed object with its first error line, what ninja has not finished; the log goes back in $OUT
    # grep finding nothing is the good case: it must not end the script (set -e, pipefail) before the count
    { grep -a '^FAILED: ' "$work/ninja.log" || true; } | sed 's/^FAILED: //' | sort -u | while read -r obj _; do
        echo "$obj"
        grep -a -A400 "^FAILED: $obj" "$work/ninja.log" | grep -a -m2 'error' | sed 's/^/    /' || true
    done
    echo "failed objects: $(grep -ac '^FAILED: ' "$work/ninja.log" || true); last step: $(grep -ao '^\[[0-9]*/[0-9]*\]' "$work/ninja.log" | tail -1)"
    if pgrep -x ninja >/dev/null; then  # cut short (the hold ends): what is compiling or not started yet
        mapfile -t objects <"$work/objects.txt"
        (cd "$(cat "$work/tree")/build" && ninja -n -k 0 "${objects[@]}" 2>/dev/null |
            grep -o 'Building CUDA object [^ ]*' | sed 's/Building CUDA object //') >"$work/not_finished.txt" || true
        echo "ninja still running; CUDA objects not finished: $(wc -l <"$work/not_finished.txt") (not_finished.txt)"
    fi
    mkdir -p "${OUT:-$work/out}" && cp "$work/ninja.log" "$work/configure.log" "$work/not_finished.txt" "${OUT:-$work/out}/" 2>/dev/null || true
    ;;
*)
    echo "usage: $0 pack|stash|setup|configure|compile|watch SECONDS|failures" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# torchvision on a GPU machine, built by condapipe's rendered recipe against the machine's torch:
# the recipe's build.sh (host-torch check, explicit -gencode flags for exactly the arch list, libpng /
# libjpeg-turbo / libwebp from a host prefix, nvJPEG from the CUDA toolkit) runs unchanged, then
#   - nms, roi_align (and nvJPEG) on the GPU match the CPU (the recipe's own package test script),
#   - the fatbins of torchvision/_C.so hold exactly the promised archs (cuobjdump: SASS sm_90 only,
#     no PTX), and _C.so comes back for `condapipe verify`-style checks on the build machine.
# Without conda on the machine the build runs outside an engine: PREFIX is a host prefix made from
# the staged Debian packages, PYTHON the machine's torch venv, pip installs into a folder (PIP_TARGET).
#
# usage (repository root, after scripts/torchvision_gpu_stage.sh):
#   scripts/torchvision_gpu_proof.sh [STAGE] [OUT]     (defaults .condapipe/torchvision-gpu, $OUT)
# Environment: TORCH_PYTHON (default /opt/torch/.venv/bin/python), CUDA_HOME (default /usr/local/cuda).
set -euo pipefail

stage=$(realpath "${1:-.condapipe/torchvision-gpu}")
out=$(realpath -m "${2:-${OUT:-out/torchvision-gpu}}")
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="${CUDA_HOME}/bin:${PATH}"
repo=$(pwd)
mkdir -p "${out}"
work=$(mktemp -d /tmp/torchvision-gpu.XXXXXX)
log="${out}/proof.log"
exec > >(tee "${log}") 2>&1
started=$(date +%s)
step() { echo "== $(( $(date +%s) - started ))s: $*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
nvcc --version | tail -2
"${python}" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, getattr(torch._C, "_cuda_getArchFlags", lambda: None)())'

step "host prefix from the staged Debian packages"
prefix="${work}/prefix"
mkdir -p "${prefix}/lib" "${prefix}/include" "${prefix}/bin" "${work}/debs"
for deb in "${stage}"/debs/*.deb; do
    dpkg-deb -x "${deb}" "${work}/debs"
done
cp -a "${work}/debs/usr/lib/x86_64-linux-gnu/." "${prefix}/lib/"
cp -a "${work}/debs/usr/include/." "${prefix}/include/"
cp -a "${work}/debs/usr/include/x86_64-linux-gnu/." "${prefix}/include/"  # jconfig.h (multiarch)
cp -a "${work}/debs/usr/bin/." "${prefix}/bin/"
# libpng-config: Debian's /usr and its disabled --libdir become this prefix (as conda's libpng has it)
for config in "${prefix}"/bin/libpng*-config; do
    [[ -L "${config}" ]] && continue
    "${python}" - "${config}" "${prefix}" <<'PY'
import re
import sys

path, prefix = sys.argv[1:3]
text = open(path, encoding="utf-8").read().replace('prefix="/usr"', f'prefix="{prefix}"')
text = text.replace("${prefix}/lib/x86_64-linux-gnu", "${prefix}/lib").replace("\nlibdir=\n", '\nlibdir="${prefix}/lib"\n')
text = re.sub(r'\n\s*echo >&1 "[^"\n]*option is disabled in Debian/Ubuntu"\n\s*exit 1\n', "\n", text)
open(path, "w", encoding="utf-8").write(text)
PY
done
# setuptools < 81 (the release's setup.py imports pkg_resources) and pip, ahead of the venv's own:
# unpacked into an overlay on PYTHONPATH, whose sitecustomize installs setuptools' distutils shim
# (setup.py imports distutils first; Python 3.12 has none).
overlay="${work}/overlay"
mkdir -p "${overlay}"
"${python}" - "${overlay}" "${stage}"/wheels/*.whl <<'PY'
import sys
import zipfile

for wheel in sys.argv[2:]:
    zipfile.ZipFile(wheel).extractall(sys.argv[1])
open(f"{sys.argv[1]}/sitecustomize.py", "w").write("__import__('_distutils_hack').add_shim()\n")
PY
export PYTHONPATH="${overlay}"
"${python}" -c 'import pkg_resources, setuptools, pip, distutils.command.clean; print("setuptools", setuptools.__version__, "pip", pip.__version__)'
mkdir -p "${work}/tools"
install -m 0755 "${stage}/ninja" "${work}/tools/ninja"
export PATH="${prefix}/bin:${work}/tools:${PATH}"

step "source"
mkdir -p "${work}/src"
tar -xzf "${stage}/vision-source.tar.gz" -C "${work}/src" --strip-components=1
source_version=$(head -1 "${work}/src/version.txt")
echo "torchvision source ${source_version}; recipe rendered for torchvision 0.26.0 (the pair of torch 2.11.0)"

step "the rendered build.sh"
# The variant keys (cuda_version, torch_arch_names, ...) the rendered build.sh reads.
# shellcheck disable=SC1091
source "${stage}/variant.env"
# shellcheck disable=SC2154
archs_promised="${torch_arch_names}" cuda="${cuda_version}"
site="${work}/site"
(
    cd "${work}/src"
    export PREFIX="${prefix}" PYTHON="${python}" SRC_DIR="${work}/src" PKG_VERSION="${source_version%a0}"
    export PIP_TARGET="${site}"
    bash "${stage}/recipe/build.sh"
) > "${out}/build.log" 2>&1 || { tail -60 "${out}/build.log"; exit 1; }
grep -E "^(condapipe:|Building torchvision with|USE_|BUILD_CUDA_SOURCES|NVCC_FLAGS)" "${out}/build.log" || true
so=$(ls "${site}"/torchvision/_C*.so)
image=$(ls "${site}"/torchvision/image*.so)

step "fatbin archs of _C.so (promise: ${archs_promised})"
cuobjdump --list-elf "${so}" | tee "${out}/cuobjdump-elf.txt" | sed -n 1,5p
cuobjdump --list-ptx "${so}" > "${out}/cuobjdump-ptx.txt" 2>&1 || true
elf_archs=$(grep -o 'sm_[0-9]*[af]\?' "${out}/cuobjdump-elf.txt" | sort -u | tr '\n' ' ')
ptx_count=$(grep -c '\.ptx' "${out}/cuobjdump-ptx.txt" || true)
echo "SASS archs: ${elf_archs}; PTX images: ${ptx_count}"
[[ "${elf_archs}" == "${archs_promised} " && "${ptx_count}" == "0" ]] || { echo "FAIL: fatbin archs differ from the promise" >&2; exit 1; }
cp "${so}" "${out}/torchvision_C.so"
ldd "${image}" | grep -E "png|jpeg|webp|nvjpeg" | tee "${out}/image-ldd.txt"

step "the package test on the GPU: nms, roi_align, nvJPEG vs the CPU"
# The image libraries and nvJPEG are found through the prefix and the toolkit here; in a conda
# environment `condapipe fix` gives _C.so / image.so their rpaths instead.
# -u and faulthandler: the first run died by SIGSEGV with nothing printed (stdout to a pipe is
# block-buffered, and a segfault prints no traceback); now every check line and the crashing
# frame reach check.txt.
LD_LIBRARY_PATH="${prefix}/lib:${CUDA_HOME}/lib64" PYTHONPATH="${site}:${overlay}" \
    "${python}" -u -X faulthandler "${repo}/recipes/torchvision/test/check_torchvision.py" \
    "${source_version%a0}" 2.11.0 "${cuda}" 1 2>&1 | tee "${out}/check.txt"
grep -q "match the CPU" "${out}/check.txt" || { echo "FAIL: no GPU comparison ran" >&2; exit 1; }
step "done"
rm -rf "${work}"

#!/usr/bin/env bash
# An nvcc of an older CUDA without conda and without touching the system's CUDA: Debian's non-free
# CUDA packages (11.8 in bookworm, 12.4 in trixie) are downloaded with `apt-get download` (nothing is
# installed) and unpacked with `dpkg -x` under DEST; DEST/cuda is then laid out as a CUDA_HOME
# (bin/nvcc with its own nvcc.profile, include, lib64, lib64/stubs/libcuda.so, nvvm) made of relative
# links into the unpacked Debian tree. Prints the CUDA_HOME and the host compiler to use.
#
# usage: scripts/cuda_toolchain_debian.sh CUDA_VERSION DEST [--magma]
#   CUDA_VERSION  11.8 (bookworm) or 12.4 (trixie)
#   --magma       also unpack the suite's libmagma-dev (contrib; built for that CUDA) under DEST/magma
#
# Needs: apt sources with `non-free` (and `contrib` for --magma) of the suite, `apt-get update` done;
# dpkg-deb. The host compiler nvcc accepts (g++-11 for 11.8, g++ <= 13 for 12.4) is not downloaded:
# apt-get install g++-11 (bookworm) or g++-13 (trixie) and pass it as CUDAHOSTCXX / -ccbin.
set -euo pipefail

usage() { echo "usage: $0 CUDA_VERSION DEST [--magma]   (CUDA_VERSION: 11.8 or 12.4)" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cuda=$1
dest=$2
magma=0
[[ "${3:-}" == "--magma" ]] && magma=1

case "${cuda}" in
    11.8) suite=bookworm ;;
    12.4) suite=trixie ;;
    *) echo "error: CUDA ${cuda}: Debian ships 11.8 (bookworm) and 12.4 (trixie) only" >&2; exit 2 ;;
esac

# The version of PACKAGE in SUITE (first line of apt-cache madison whose origin is SUITE/...).
version_in_suite() {
    apt-cache madison "$1" | awk -F'|' -v s=" ${suite}/" '$3 ~ s && $3 ~ /Packages/ {gsub(/ /, "", $2); print $2; exit}'
}

toolkit_version=$(version_in_suite nvidia-cuda-toolkit)
if [[ -z "${toolkit_version}" || "${toolkit_version}" != *"~${cuda}."* ]]; then
    echo "error: no nvidia-cuda-toolkit ${cuda} in ${suite} (add '${suite} non-free' to the apt sources, apt-get update)" >&2
    exit 1
fi

# What nvcc needs to compile PyTorch: the toolkit (nvcc, cicc, libdevice, ptxas), the headers and
# static/shared libraries (nvidia-cuda-dev), and the runtime and math libraries it links against.
wanted='^(libcudart[0-9.]+|libnvrtc[0-9.]+|libnvrtc-builtins[0-9.]+|libnvtoolsext1|libnvvm[0-9]+|libcublas[0-9]+|libcublaslt[0-9]+|libcufft[0-9]+|libcurand[0-9]+|libcusolver[0-9]+|libcusparse[0-9]+|libnvjitlink[0-9]+|libnvfatbin[0-9]+|libcupti-dev|libnvidia-ml-dev|libcub-dev|libthrust-dev|libcu\+\+-dev)$'
# Depends entries "name (= version)" / "name (>= version)" -> name=version / name/suite
depends_of() {
    apt-cache show "$1=$2" | sed -n 's/^Depends: //p' | tr ',' '\n' | sed 's/|.*//; s/^ *//; s/ *$//'
}
dev_version=$(version_in_suite nvidia-cuda-dev)
from_source=()
specs=("nvidia-cuda-toolkit=${toolkit_version}" "nvidia-cuda-dev=${dev_version}")
while read -r name op version; do
    [[ -n "${name}" && "${name}" =~ ${wanted} ]] || continue
    if [[ "${op}" == "(=" ]]; then
        specs+=("${name}=${version%)}")
    elif [[ -n "$(version_in_suite "${name}")" ]]; then
        specs+=("${name}/${suite}")
    else
        # libcub-dev, libthrust-dev, libcu++-dev are in the suite's main, whose binary index a
        # bookworm machine usually lacks (only its deb-src): the headers come from the source package.
        from_source+=("${name}")
    fi
    if [[ "${name}" == "libcupti-dev" ]]; then
        cupti_dev_version=${version%)}
    fi
done < <(depends_of nvidia-cuda-dev "${dev_version}")
if [[ -n "${cupti_dev_version:-}" ]]; then
    while read -r name op version; do
        [[ "${name}" == libcupti[0-9]* && "${op}" == "(=" ]] && specs+=("${name}=${version%)}")
    done < <(depends_of libcupti-dev "${cupti_dev_version}")
fi
if (( magma )); then
    for name in libmagma-dev libmagma2 libmagma-sparse2; do
        specs+=("${name}/${suite}")
    done
fi

mkdir -p "${dest}/debs" "${dest}/root"
dest=$(cd "${dest}" && pwd)
echo "downloading ${#specs[@]} packages from ${suite}: ${specs[*]}"
(cd "${dest}/debs" && apt-get download "${specs[@]}")

for deb in "${dest}"/debs/*.deb; do
    case "$(basename "${deb}")" in
        libmagma*) if (( magma )); then mkdir -p "${dest}/magma"; dpkg-deb -x "${deb}" "${dest}/magma"; fi ;;
        *) dpkg-deb -x "${deb}" "${dest}/root" ;;
    esac
done

if (( ${#from_source[@]} )); then
    # The suite's source version of each binary (madison's "Sources" line), then the source package
    # of that version building it (cccl in trixie; `apt-get source NAME/SUITE` would map the
    # binary name through the default suite instead).
    sources=()
    for name in "${from_source[@]}"; do
        src_version=$(apt-cache madison "${name}" | awk -F'|' -v s=" ${suite}/" '$3 ~ s && $3 ~ /Sources/ {gsub(/ /, "", $2); print $2; exit}')
        src_name=$(apt-cache showsrc "${name}" | awk -v v="${src_version}" '/^Package: / {p = $2} /^Version: / && $2 == v {print p; exit}')
        if [[ -z "${src_version}" || -z "${src_name}" ]]; then
            echo "error: ${name} is neither a binary nor a source package of ${suite} here (add deb-src ${suite} main)" >&2
            exit 1
        fi
        sources+=("${src_name}=${src_version}")
    done
    mapfile -t sources < <(printf '%s\n' "${sources[@]}" | sort -u)
    echo "headers of ${from_source[*]} from the ${suite} source package(s) ${sources[*]}"
    mkdir -p "${dest}/src"
    if (cd "${dest}/src" && apt-get source --download-only "${sources[@]}"); then
        for tarball in "${dest}"/src/*.orig.tar.*; do
            tar -xf "${tarball}" -C "${dest}/src"
        done
        for top in "${dest}"/src/*/; do
            [[ -d "${top}cub/cub" ]] && cp -rn "${top}cub/cub" "${dest}/root/usr/include/"
            [[ -d "${top}thrust/thrust" ]] && cp -rn "${top}thrust/thrust" "${dest}/root/usr/include/"
            if [[ -d "${top}libcudacxx/include" ]]; then
                cp -rn "${top}libcudacxx/include/." "${dest}/root/usr/include/"
            fi
        done
    else
        # The mirror may no longer hold that source version: NVIDIA's CCCL wheel of the same CUDA
        # release carries the same headers (include/{cub,thrust,cuda,nv}).
        wheel_name="nvidia-cuda-cccl-cu${cuda%%.*}==${cuda}.*"
        echo "apt-get source failed; taking the CCCL headers from PyPI: ${wheel_name}" >&2
        "${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: -d "${dest}/src" "${wheel_name}"
        mkdir -p "${dest}/src/cccl-wheel"
        for wheel in "${dest}"/src/nvidia_cuda_cccl_*.whl; do
            "${PYTHON:-python3}" -m zipfile -e "${wheel}" "${dest}/src/cccl-wheel"
        done
        cp -rn "${dest}/src/cccl-wheel/nvidia/cuda_cccl/include/." "${dest}/root/usr/include/"
    fi
    test -f "${dest}/root/usr/include/cub/cub.cuh"
fi

# Debian splits the toolkit over /usr/bin, /usr/include, /usr/lib/x86_64-linux-gnu and
# /usr/lib/nvidia-cuda-toolkit (nvcc, cicc, libdevice); its nvcc.profile is an absolute link to
# /etc/nvcc.profile naming /usr paths. Build a CUDA_HOME of relative links, with nvcc itself as a
# hard link (nvcc reads nvcc.profile next to its real path) and a profile of NVIDIA's layout.
root=${dest}/root
tk=${root}/usr/lib/nvidia-cuda-toolkit
home=${dest}/cuda
rm -rf "${home}"
mkdir -p "${home}/bin" "${home}/nvvm/bin" "${home}/nvvm/lib64" "${home}/nvvm/include"
ln "${tk}/bin/nvcc" "${home}/bin/nvcc"
for tool in ptxas fatbinary nvlink cudafe++ bin2c cuobjdump nvdisasm nvprune cu++filt; do
    if [[ -e "${root}/usr/bin/${tool}" ]]; then
        ln -s "../../root/usr/bin/${tool}" "${home}/bin/${tool}"
    fi
done
ln -s ../../root/usr/lib/nvidia-cuda-toolkit/bin/crt "${home}/bin/crt"
ln -s ../../../root/usr/lib/nvidia-cuda-toolkit/bin/cicc "${home}/nvvm/bin/cicc"
ln -s ../../root/usr/lib/nvidia-cuda-toolkit/libdevice "${home}/nvvm/libdevice"
for lib in "${root}"/usr/lib/x86_64-linux-gnu/libnvvm.so*; do
    ln -s "../../../root/usr/lib/x86_64-linux-gnu/$(basename "${lib}")" "${home}/nvvm/lib64/"
done
if [[ -e "${root}/usr/include/nvvm.h" ]]; then
    ln -s ../../../root/usr/include/nvvm.h "${home}/nvvm/include/nvvm.h"
fi
ln -s ../root/usr/include "${home}/include"
ln -s ../root/usr/lib/x86_64-linux-gnu "${home}/lib64"
cat > "${home}/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF

"${home}/bin/nvcc" --version | tail -2

# The host compiler Debian's toolkit would use: the first g++-N of its bin/g++ wrapper's list that
# is installed (else the first of the list, to install).
mapfile -t supported < <(sed -n 's/^\s*prog=\(g++-[0-9]*\)$/\1/p' "${tk}/bin/g++" | awk '!seen[$0]++')
host_cxx=""
for candidate in "${supported[@]}"; do
    if command -v "${candidate}" > /dev/null; then
        host_cxx=${candidate}
        break
    fi
done
if [[ -z "${host_cxx}" ]]; then
    host_cxx=${supported[0]:-g++}
fi
if command -v "${host_cxx}" > /dev/null; then
    probe=$(mktemp -d)
    printf '__global__ void k(float *x) { x[threadIdx.x] *= 2.f; }\nint main() { k<<<1, 1>>>(nullptr); return 0; }\n' > "${probe}/t.cu"
    "${home}/bin/nvcc" -ccbin "${host_cxx}" -gencode arch=compute_80,code=sm_80 -o "${probe}/t" "${probe}/t.cu"
    "${home}/bin/cuobjdump" --list-elf "${probe}/t"
    rm -rf "${probe}"
    echo "ok: nvcc ${cuda} compiles for sm_80 with -ccbin ${host_cxx}"
else
    echo "note: nvcc ${cuda} needs ${host_cxx} as host compiler: apt-get install ${host_cxx}" >&2
fi

echo "CUDA_HOME=${home}"
echo "CUDAHOSTCXX=${host_cxx}"
if (( magma )); then
    echo "MAGMA_ROOT=${dest}/magma/usr"
fi

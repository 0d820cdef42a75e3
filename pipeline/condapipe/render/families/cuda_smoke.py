"""cuda-smoke: a one-kernel CUDA library + CLI, built through the same spec -> render -> engine path
as PyTorch, in about a minute.

It proves a machine's toolchain (nvcc, host gcc, the engine, rpath fixing, channel) before a
9-hour PyTorch build. Sources live in recipes/cuda-smoke/src and are copied into the rendered
recipe directory, so the recipe builds on its own; each CUDA variant carries its arch list as
nvcc -gencode flags (the spec's resolved variant: the CUDA's default list or --arch), and records
it in the package (info/about.json) for verify.
"""

from __future__ import annotations

from pathlib import Path

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.errors import UsageError
from condapipe.render.families._common import family_dir, promise_extra
from condapipe.render.model import (
    About,
    ExtraFile,
    RecipeModel,
    Script,
    SourceRef,
    Tests,
    Variants,
)

SOURCES = ("cuda_smoke.cu", "cuda_smoke.h", "cuda_smoke_cli.c")

# Run in the unpacked source dir ($SRC_DIR), which holds the files of recipes/cuda-smoke/src.
BUILD_BODY = """\
nvcc_release="$(nvcc --version | sed -n 's/.*release \\([0-9][0-9]*\\.[0-9][0-9]*\\).*/\\1/p')"
if [ "${nvcc_release}" != "${cuda_version}" ]; then
    echo "cuda-smoke: nvcc on PATH is CUDA ${nvcc_release:-unknown}," \\
        "but CUDA ${cuda_version} was requested" >&2
    exit 1
fi
read -r -a gencode <<< "${cuda_gencode}"
mkdir -p "${PREFIX}/lib" "${PREFIX}/bin" "${PREFIX}/include"
echo "cuda-smoke: nvcc ${nvcc_release} for archs ${cuda_arch_list}"
nvcc -O2 -std=c++17 "${gencode[@]}" -Xcompiler -fPIC -shared \\
    -DCUDA_SMOKE_ARCHS="\\"${cuda_arch_list}\\"" -DCUDA_SMOKE_CUDA="\\"${cuda_version}\\"" \\
    -Xlinker -soname=libcuda_smoke.so -o "${PREFIX}/lib/libcuda_smoke.so" cuda_smoke.cu
"${CC:-gcc}" -O2 -I. -o "${PREFIX}/bin/cuda-smoke" cuda_smoke_cli.c \\
    -L"${PREFIX}/lib" -lcuda_smoke -Wl,-rpath,"${PREFIX}/lib"
cp cuda_smoke.h "${PREFIX}/include/"
"""


def source_dir() -> Path:
    """src/ of cuda-smoke's profile folder, recipes/cuda-smoke."""
    return family_dir("cuda-smoke") / "src"


def build_model(spec: BuildSpec) -> RecipeModel:
    """The cuda-smoke recipe for `spec`: one variant per CUDA version, each with its arch list."""
    variants = [v for v in spec.cuda_variants if not v.is_cpu]
    if not variants or len(variants) != len(spec.cuda_variants):
        raise UsageError("cuda-smoke is a CUDA package: give --cuda X.Y (not cpu)")
    for variant in variants:
        if variant.archs is None or not len(variant.archs):
            raise UsageError(f"cuda-smoke needs an arch list for CUDA {variant.cuda}; give --arch")
    src = source_dir()
    rows = [
        {"cuda_version": v.cuda, "cuda_arch_list": v.archs.torch_arch_list()} for v in variants if v.archs
    ]
    return RecipeModel(
        name="cuda-smoke",
        version=spec.version,
        build_number=spec.build_number,
        source=SourceRef(path=Path("src")),
        script=Script(
            body=BUILD_BODY,
            passthrough=("CC", "NVCC_APPEND_FLAGS"),
        ),
        tests=Tests(commands=("cuda-smoke --allow-no-gpu", "cuda-smoke --build-info")),
        about=About(
            summary="One CUDA kernel and a CLI that runs it: proves a CUDA build toolchain end to end",
            license="BSD-3-Clause",
        ),
        variants=Variants(
            keys=(
                ("cuda_version", tuple(v.cuda for v in variants)),
                ("cuda_arch_list", tuple(v.archs.torch_arch_list() for v in variants if v.archs)),
                ("cuda_gencode", tuple(" ".join(v.archs.gencode_flags()) for v in variants if v.archs)),
            ),
            zip_keys=(("cuda_version", "cuda_arch_list", "cuda_gencode"),),
        ),
        extra_files=tuple(ExtraFile(name=f"src/{name}", origin=src / name) for name in SOURCES),
        # libcuda.so.1 comes with the driver, never from a package (cudart is linked statically).
        missing_dso_allowlist=("libcuda.so*",),
        extra=promise_extra(rows, archs_key="cuda_arch_list"),
    )

"""The libtorch family: PyTorch's C++ library as a conda package, built with CMake + Ninja.

C++ users want libtorch (shared libraries, headers, share/cmake/Torch for find_package(Torch))
without a Python; today they unpack a zip from pytorch.org. This family builds it from the same
upstream source, per-version tables and patch catalog as the pytorch family (a libtorch build
is pytorch's CMake project with BUILD_PYTHON=OFF), so a CUDA/arch/cuDNN/Jetson choice means the
same thing for both. There is no Python axis: one package per CUDA variant.

The package test configures, builds and runs a tiny CMake project (recipes/libtorch/cmake_test)
that uses find_package(Torch), which is how C++ users consume it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.compile_cache import sccache_env_names
from condapipe.facts import tables
from condapipe.render.families import pytorch
from condapipe.render.families._common import (
    common_value,
    compile_cache_values,
    family_data,
    family_dir,
    per_job_mib,
    promise_extra,
    render_template,
    select_catalog,
    variant_matrix,
)
from condapipe.render.families.pytorch import (
    about,
    missing_dso_allowlist,
    platform_rows,
    source_ref,
    torch_env,
    variant_row,
)
from condapipe.render.model import (
    ALWAYS,
    Dep,
    ExtraFile,
    RecipeModel,
    Requirements,
    Script,
    Tests,
    When,
)

FAMILY = "libtorch"
# The variant keys the libtorch recipe uses (pytorch's rows carry more: the Python-side mutex,
# the arch names its import test checks).
KEYS = (
    "cuda_version",
    "cudnn_version",
    "build_tag",
    "torch_cuda_arch_list",
    "torch_nvcc_flags",
    "build_split_cuda",
    "use_static_cudnn",
    "magma_package",
    "cuda_run_constraint",
)

TEST_COMMANDS = (
    'test -f "${PREFIX}/share/cmake/Torch/TorchConfig.cmake"',
    'cmake -S cmake_test -B cmake_test/build -G Ninja -DCMAKE_PREFIX_PATH="${PREFIX}"',
    "cmake --build cmake_test/build",
    "./cmake_test/build/torch_smoke",
)


def recipe_dir() -> Path:
    """libtorch's profile folder, recipes/libtorch (templates and the package test project)."""
    return family_dir(FAMILY)


def has_magma(spec: BuildSpec) -> bool:
    """Whether CUDA variants link magma on the target platform (its profile's prerequisites)."""
    return pytorch.has_magma(spec, FAMILY)


def _on(platforms: list[str] | tuple[str, ...], when: When) -> When:
    return When(platforms=tuple(platforms), python=when.python, cuda=when.cuda) if platforms else when


def _requirements(spec: BuildSpec, rows: list[dict[str, str]], data: dict) -> Requirements:
    blas = data["blas"][spec.blas]
    cuda_values = tuple(r["cuda_version"] for r in rows if r["cuda_version"] != "cpu")
    has_cpu = any(r["cuda_version"] == "cpu" for r in rows)
    on_cuda = When(cuda=cuda_values) if has_cpu else ALWAYS
    host = [Dep(name, _on(blas.get("platforms", ()), ALWAYS)) for name in blas["host"]]
    if cuda_values and has_magma(spec):
        host.append(Dep("{{ magma_package }}", on_cuda))
    run = [Dep(name, _on(blas.get("platforms", ()), ALWAYS)) for name in blas["run"]]
    if cuda_values and not spec.jetson:
        run.append(Dep("{{ cuda_run_constraint }}", on_cuda))
    return Requirements(
        build=tuple(Dep(name) for name in data["build_requirements"]),
        host=tuple(host),
        run=tuple(run),
    )


def build_model(spec: BuildSpec) -> RecipeModel:
    """The libtorch recipe of one spec (one package per CUDA variant)."""
    data = family_data(FAMILY)
    series = tables.pytorch_info(spec.version)
    full = platform_rows(spec, [variant_row(v) for v in spec.cuda_variants])
    keys = [k for k in KEYS if all(k in row for row in full)]
    if all(v.is_cpu for v in spec.cuda_variants):
        keys = [k for k in keys if k not in ("magma_package", "cuda_run_constraint")]
    rows = [{k: row[k] for k in keys} for row in full]
    # Same source tree as pytorch, so the same fixes: the catalog is keyed on "pytorch".
    catalog = select_catalog(spec, FAMILY, {c: spec.version for c in spec.cudas})

    env = torch_env(spec, data, catalog, magma_off="OFF")

    body = render_template(
        "libtorch/build.sh.j2",
        **per_job_mib("libtorch", spec.version),
        static_nccl=series.static_nccl,
        split_cuda_read=series.build_split_cuda,
        env_by_cuda=catalog.env_by_cuda,
        system_cudnn=bool(spec.jetson),
        # libtorch has no cuda_host_libraries yet: its CUDA builds link the machine's libraries
        host_library_cudas=[],
        launchers_as_args=True,
        answers_launcher_searches=True,
        **compile_cache_values("${PKG_NAME}-${PKG_VERSION}-${build_tag}"),
    )
    tag = common_value(rows, "build_tag")
    here = recipe_dir()
    return RecipeModel(
        name=FAMILY,
        version=spec.version,
        build_number=spec.build_number,
        build_string=f"{tag or '{{ build_tag }}'}_{spec.build_number}",
        source=dataclasses.replace(source_ref(spec, data), patches=catalog.patches),
        script=Script(
            env=tuple(env.items()),
            body=body,
            passthrough=tuple(data["passthrough"]),
            secrets=sccache_env_names(),
        ),
        requirements=_requirements(spec, rows, data),
        tests=Tests(
            commands=TEST_COMMANDS,
            requires=tuple(data["test_requires"]),
            files=("cmake_test",),
        ),
        about=about(data),
        variants=variant_matrix((), rows),
        extra_files=tuple(ExtraFile(name=name, origin=here / name) for name in data["test_files"]),
        detect_binary_prefix=False,
        missing_dso_allowlist=missing_dso_allowlist(spec, data),
        extra=promise_extra(rows, archs_key="torch_cuda_arch_list"),
    )

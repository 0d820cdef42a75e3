"""The torchvision family: torchvision built against one condapipe-built pytorch package.

A torchvision release is built against exactly one PyTorch release (pipeline/data/torchvision.yaml).
Its host env holds that pytorch build - same release, Python, CUDA and cuDNN, pinned by pytorch's
build string, and with `condapipe build pytorch --with torchvision` by its build number too - and
the package runs only with it (the same pin in run). CUDA variants compile exactly the spec's arch
list: TORCH_CUDA_ARCH_LIST, and the same archs as explicit -gencode flags (torch.utils.cpp_extension
of a release older than the arch refuses it by name otherwise). The package records that list like
pytorch's, so `condapipe verify` checks the fatbins of torchvision/_C.so against it.
"""

from __future__ import annotations

import dataclasses

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from condapipe.buildspec.build_spec import BuildSpec, CudaVariant
from condapipe.facts import tables
from condapipe.render.families._common import (
    PYTHON_RUN,
    common_value,
    family_data,
    family_dir,
    per_job_mib,
    promise_extra,
    render_template,
    select_catalog,
    variant_matrix,
)
from condapipe.render.families.pytorch import (
    NONE,
    about,
    cuda_library_deps,
    host_library_cudas,
    missing_dso_allowlist,
    platform_rows,
    source_ref,
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

FAMILY = "torchvision"
TORCH = "pytorch"  # the family torchvision is built against (its profile's built_against)
# The variant keys of the torchvision recipe: pytorch's build tag (its build string, which the host
# pin names), the arch list in both spellings, and the nvcc flags that compile exactly it.
KEYS = (
    "cuda_version",
    "build_tag",
    "torch_cuda_arch_list",
    "torch_arch_names",
    "torchvision_nvcc_flags",
    "cuda_run_constraint",
)
TEST_SCRIPT = "test/check_torchvision.py"


def nvcc_flags(variant: CudaVariant) -> str:
    """-gencode flags for exactly the variant's archs (+PTX images), then the CUDA's fatbin flags."""
    if variant.is_cpu or variant.archs is None:
        return NONE
    return " ".join((*variant.archs.gencode_flags(), *variant.nvcc_flags))


def _rows(spec: BuildSpec) -> list[dict[str, str]]:
    full = platform_rows(spec, [variant_row(v) for v in spec.cuda_variants])
    for row, variant in zip(full, spec.cuda_variants, strict=True):
        row["torchvision_nvcc_flags"] = nvcc_flags(variant)
    keys = [k for k in KEYS if all(k in row for row in full)]
    if all(v.is_cpu for v in spec.cuda_variants):
        keys = [k for k in keys if k != "cuda_run_constraint"]
    return [{k: row[k] for k in keys} for row in full]


def torch_pin(spec: BuildSpec, rows: list[dict[str, str]]) -> str:
    """The match spec of the exact pytorch build: its release, and its build string
    (py<python>_<build tag>_<build number>; any build number unless the plan built it, or the
    whole build string of a pytorch package made elsewhere)."""
    torch = tables.torchvision_info(spec.version).torch
    build = dict(spec.against).get(TORCH, "*")
    if build == "*" or build.isdigit():
        tag = common_value(rows, "build_tag") or "{{ build_tag }}"
        build = f"py{{{{ python }}}}_{tag}_{build}"
    # The bracket form: rattler-build's recipe parser refuses a positional build string with a dot
    # (py3.11_...), which pytorch's build strings have; conda and rattler both read `[build=...]`.
    return f"pytorch =={torch}[build={build}]"


def _on_cudas(spec: BuildSpec, selected: list[str], has_cpu: bool) -> When | None:
    """ALWAYS when `selected` is every CUDA variant, None for none, else those variants."""
    if not selected:
        return None
    every = [c for c in spec.cudas if c != "cpu"]
    return ALWAYS if selected == every and not has_cpu else When(cuda=tuple(selected))


def _requirements(
    spec: BuildSpec, rows: list[dict[str, str]], data: dict, info: tables.TorchvisionInfo
) -> Requirements:
    cudas = [r["cuda_version"] for r in rows if r["cuda_version"] != "cpu"]
    has_cpu = len(cudas) < len(rows)
    pin = torch_pin(spec, rows)
    images = data["image_libraries"]
    image_deps = [Dep(images["png"]), Dep(images["jpeg"])] + ([Dep(images["webp"])] if info.webp else [])
    pins = dict(info.host_pins)
    tools = [Dep(f"{n} {pins[n]}" if n in pins else n) for n in data["host_requirements"]]
    host = [Dep("python"), *tools, Dep(pin), *image_deps]
    # a CUDA whose libraries are host packages: the headers and libraries the build reads (cuBLAS,
    # cuSPARSE, cuSOLVER through torch's CUDAContext.h, nvJPEG, cudart) come from them too
    host += cuda_library_deps(spec, data, "host", len(rows))
    run = [PYTHON_RUN, Dep(pin), *(Dep(n) for n in data["run_requirements"]), *image_deps]
    on_cuda = _on_cudas(spec, cudas, has_cpu)
    if on_cuda is not None and not spec.jetson:
        run.append(Dep("{{ cuda_run_constraint }}", on_cuda))
        for entry in data["cuda_run_packages"]:
            matching = [c for c in cudas if Version(c) in SpecifierSet(entry["cuda"])]
            when = _on_cudas(spec, matching, has_cpu)
            if when is not None:
                run += [Dep(name, when) for name in entry["packages"]]
    return Requirements(
        build=tuple(Dep(name) for name in data["build_requirements"]),
        host=tuple(host),
        run=tuple(run),
    )


def build_model(spec: BuildSpec) -> RecipeModel:
    """The torchvision recipe of one spec (all its Pythons and CUDA variants)."""
    data = family_data(FAMILY)
    info = tables.torchvision_info(spec.version)
    rows = _rows(spec)
    catalog = select_catalog(spec, FAMILY, {c: spec.version for c in spec.cudas})
    env = dict(data["constant_env"])
    env.update(catalog.env)
    env.update(spec.extra_env)
    body = render_template(
        "torchvision/build.sh.j2",
        torch_version=info.torch,
        webp=info.webp,
        host_library_cudas=host_library_cudas(spec),
        cuda_root_headers=data["cuda_host_libraries"]["headers"],
        **per_job_mib(FAMILY, spec.version),
    )
    tag = common_value(rows, "build_tag")
    webp = "1" if info.webp else "0"
    test = f"python {TEST_SCRIPT} {spec.version} {info.torch} {{{{ cuda_version }}}} {webp}"
    return RecipeModel(
        name=FAMILY,
        version=spec.version,
        build_number=spec.build_number,
        build_string=f"py{{{{ python }}}}_{tag or '{{ build_tag }}'}_{spec.build_number}",
        source=dataclasses.replace(source_ref(spec, data), patches=catalog.patches),
        script=Script(env=tuple(env.items()), body=body, passthrough=tuple(data["passthrough"])),
        requirements=_requirements(spec, rows, data, info),
        tests=Tests(imports=("torchvision", "torchvision.ops"), commands=(test,), files=("test",)),
        about=about(data),
        variants=variant_matrix(spec.pythons, rows),
        extra_files=(ExtraFile(name=TEST_SCRIPT, origin=family_dir(FAMILY) / TEST_SCRIPT),),
        detect_binary_prefix=False,
        missing_dso_allowlist=missing_dso_allowlist(spec, data),
        extra=promise_extra(rows, archs_key="torch_cuda_arch_list"),
    )

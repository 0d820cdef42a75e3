"""The magma family: BuildSpec -> RecipeModel for pytorch's magma-cudaXY packages.

One upstream magma version per recipe (the spec refuses CUDAs that need different ones); the
package name (magma-cuda118), the -gencode list and the nvcc flags vary with the CUDA variant.
The package is the static libmagma.a plus headers, as pytorch links it into libtorch_cuda. Its
test (recipes/magma/test/run_test.sh) checks that shape, compiles a magma_dgesv_gpu program
against the installed headers, and where a GPU is visible links it with cuBLAS and runs it.
"""

from __future__ import annotations

from pathlib import Path

from condapipe.buildspec.build_spec import BuildSpec, CudaVariant
from condapipe.buildspec.compile_cache import sccache_env_names
from condapipe.errors import UsageError
from condapipe.facts.arch import ArchList
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
from condapipe.render.model import (
    About,
    Dep,
    ExtraFile,
    RecipeModel,
    Requirements,
    Script,
    SourceRef,
    Tests,
)

ARCH_KEY = "magma_arch_list"  # variant key, only when the CUDAs of one render differ in their list

TEST_COMMANDS = ("bash test/run_test.sh",)


def recipe_dir() -> Path:
    """magma's profile folder, recipes/magma (templates and test files)."""
    return family_dir("magma")


def _archs(variant: CudaVariant) -> ArchList:
    if variant.archs is None or variant.magma is None:
        raise UsageError("magma is a CUDA package: --cuda cpu is not valid for it")
    return variant.archs.sass_only()


def _variant_row(variant: CudaVariant) -> dict[str, str]:
    return {
        "cuda_version": variant.cuda,
        "magma_package": variant.magma.package if variant.magma else "",
        "magma_gencode": " ".join(_archs(variant).gencode_flags()),
        "magma_nvcc_flags": ";".join(variant.nvcc_flags),
    }


def _source(spec: BuildSpec) -> SourceRef:
    src = spec.source
    if src.kind == "path":
        return SourceRef(path=src.path)
    if src.kind == "git":
        return SourceRef(git_url=src.url, git_rev=src.rev)
    if not src.url:
        raise UsageError(f"magma {spec.version}: no source; pass --source DIR or a tarball URL")
    if not src.sha256:
        raise UsageError(
            f"magma {spec.version}: no sha256 known for {src.url}; add it to cuda.yaml magma_sources "
            "or pass --source DIR with an unpacked, verified tarball"
        )
    return SourceRef(url=src.url, sha256=src.sha256)


def build_model(spec: BuildSpec) -> RecipeModel:
    """The recipe of magma for the spec's CUDA variant(s)."""
    if any(v.is_cpu for v in spec.cuda_variants):
        raise UsageError("magma is a CUDA package: --cuda cpu is not valid for it")
    data = family_data("magma")
    # Each package records its arch list; a list the CUDAs share is written out, lists that
    # differ need a variant key.
    with_archs = [{**_variant_row(v), ARCH_KEY: _archs(v).torch_arch_list()} for v in spec.cuda_variants]
    shared = common_value(with_archs, ARCH_KEY) is not None
    rows = [{k: v for k, v in row.items() if k != ARCH_KEY} for row in with_archs] if shared else with_archs
    catalog = select_catalog(spec, "magma", {c: spec.version for c in spec.cudas})
    env = {**dict(catalog.env), **dict(spec.extra_env)}
    if catalog.env_by_cuda:
        raise UsageError("magma: patch-catalog settings differ between the CUDAs; render each separately")
    body = render_template(
        "magma/build.sh.j2",
        **per_job_mib("magma", spec.version),
        launchers_as_args=True,
        answers_launcher_searches=False,
        **compile_cache_values("${PKG_NAME}-${PKG_VERSION}-cuda${cuda_version}"),
    )
    name = common_value(rows, "magma_package") or "{{ magma_package }}"
    cuda = common_value(rows, "cuda_version") or "{{ cuda_version }}"
    source = _source(spec)
    return RecipeModel(
        name=name,
        version=spec.version,
        build_number=spec.build_number,
        build_string=str(spec.build_number),
        source=SourceRef(**{**source.__dict__, "patches": catalog.patches}),
        script=Script(
            env=tuple(env.items()),
            body=body,
            passthrough=tuple(data["passthrough"]),
            secrets=sccache_env_names(),
        ),
        requirements=Requirements(build=tuple(Dep(n) for n in data["build_requirements"])),
        tests=Tests(commands=TEST_COMMANDS, files=("test",)),
        about=About(
            home=data["home"],
            license=data["license"],
            license_file=data["license_file"],
            summary=data["summary"].format(cuda=cuda),
        ),
        variants=variant_matrix((), rows),
        extra_files=tuple(ExtraFile(name=name, origin=recipe_dir() / name) for name in data["test_files"]),
        extra=promise_extra(with_archs, archs_key=ARCH_KEY),
    )

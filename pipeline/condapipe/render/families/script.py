"""The `script` model: a family rendered from its profile folder alone, with no code of its own.

A registry line `{folder: <dir>, model: script}` and that folder are the whole family:

    recipes/<dir>/family.yaml   the profile: the sections recipes/families.yaml lists, plus the
                                facts below; its `patches:` entries apply as for every family
    recipes/<dir>/build.sh      the build script body (bash; strict mode and exports come first)
    recipes/<dir>/src/          the sources, copied into the recipe dir (`spec: source: {kind: none}`)

Facts (all optional): home, dev_url, license, license_file, summary (the about section);
requirements {build, host, run} (match specs, may reference variant keys as {{ key }});
build_script (default build.sh); test_commands, test_requires; passthrough (variables a user may
set for the build tool); missing_dso_allowlist.

The variant matrix is the spec's: a python axis when the spec has Pythons, and one row per CUDA
variant with `cuda_version`, `cuda_arch_list` (8.0;9.0+PTX) and `cuda_gencode` (nvcc -gencode
flags; both empty for cpu), which build.sh reads as ${cuda_version} etc. Each CUDA package records
its CUDA and arch list for verify, as every family's does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from condapipe.buildspec.build_spec import BuildSpec, CudaVariant
from condapipe.errors import UsageError
from condapipe.render.families._common import (
    family_data,
    family_dir,
    promise_extra,
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

FACTS = (
    "home",
    "dev_url",
    "license",
    "license_file",
    "summary",
    "requirements",
    "build_script",
    "test_commands",
    "test_requires",
    "passthrough",
    "missing_dso_allowlist",
)
SOURCES = "src"  # the profile folder's source directory, copied into the recipe dir


def _facts(family: str) -> dict[str, Any]:
    data = family_data(family)
    unknown = sorted(set(data) - set(FACTS))
    if unknown:
        raise UsageError(f"{family}: unknown profile keys {', '.join(unknown)}; valid: {', '.join(FACTS)}")
    return data


def _row(variant: CudaVariant) -> dict[str, str]:
    if variant.is_cpu:
        return {"cuda_version": variant.cuda, "cuda_arch_list": "", "cuda_gencode": ""}
    if variant.archs is None or not len(variant.archs):
        raise UsageError(f"no arch list for CUDA {variant.cuda}; give --arch")
    return {
        "cuda_version": variant.cuda,
        "cuda_arch_list": variant.archs.torch_arch_list(),
        "cuda_gencode": " ".join(variant.archs.gencode_flags()),
    }


def _source(spec: BuildSpec, folder: Path) -> tuple[SourceRef, tuple[ExtraFile, ...]]:
    src = spec.source
    if src.kind == "path":
        return SourceRef(path=src.path), ()
    if src.kind == "git":
        return SourceRef(git_url=src.url, git_rev=src.rev), ()
    if src.kind == "url":
        return SourceRef(url=src.url, sha256=src.sha256), ()
    here = folder / SOURCES
    files = sorted(p for p in here.rglob("*") if p.is_file()) if here.is_dir() else []
    if not files:
        raise UsageError(f"{spec.package}: no sources: {here} is empty and the profile names no source")
    extra = tuple(ExtraFile(name=f"{SOURCES}/{p.relative_to(here).as_posix()}", origin=p) for p in files)
    return SourceRef(path=Path(SOURCES)), extra


def build_model(spec: BuildSpec) -> RecipeModel:
    """The recipe of a `script` family for `spec`, from its profile folder."""
    data = _facts(spec.package)
    folder = family_dir(spec.package)
    script = folder / str(data.get("build_script", "build.sh"))
    if not script.is_file():
        raise UsageError(f"{spec.package}: no build script {script}")
    rows = [_row(v) for v in spec.cuda_variants]
    source, sources = _source(spec, folder)
    # The profile's `patches:` entries: source fixes and config env, as for every family.
    catalog = select_catalog(spec, spec.package, {c: spec.version for c in spec.cudas})
    if catalog.env_by_cuda:
        raise UsageError(
            f"{spec.package}: a patch catalog env that holds for some CUDAs only needs a family model"
        )
    source = SourceRef(**{**source.__dict__, "patches": catalog.patches})
    requirements = data.get("requirements") or {}
    return RecipeModel(
        name=spec.package,
        version=spec.version,
        build_number=spec.build_number,
        source=source,
        script=Script(
            env=catalog.env,
            body=script.read_text(encoding="utf-8"),
            passthrough=tuple(str(n) for n in data.get("passthrough") or ()),
        ),
        requirements=Requirements(
            **{
                env: tuple(Dep(str(d)) for d in requirements.get(env) or ())
                for env in ("build", "host", "run")
            }
        ),
        tests=Tests(
            commands=tuple(str(c) for c in data.get("test_commands") or ()),
            requires=tuple(str(r) for r in data.get("test_requires") or ()),
        ),
        about=About(
            **{k: str(data.get(k, "")) for k in ("home", "license", "license_file", "summary", "dev_url")}
        ),
        variants=variant_matrix(spec.pythons, rows),
        extra_files=sources,
        missing_dso_allowlist=tuple(str(p) for p in data.get("missing_dso_allowlist") or ()),
        extra=promise_extra(rows, archs_key="cuda_arch_list"),
    )

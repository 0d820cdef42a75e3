"""The pytorch family: BuildSpec -> RecipeModel in the style of pytorch/builder's conda recipe.

Per-version facts (pins, build command, static NCCL, mutex scheme, memory per job) come from
pipeline/data/pytorch.yaml through condapipe.facts.tables.pytorch_info; every per-CUDA fact (arch
list, nvcc flags, run constraint, magma package, cuDNN, BUILD_SPLIT_CUDA, static cuDNN) is read
from the spec's resolved CudaVariant, never from the CUDA table. Everything that varies with the
CUDA variant becomes a zipped variant key, so several --cuda/--python values give one recipe
with a matrix.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from condapipe.buildspec.build_spec import BuildSpec, CudaVariant
from condapipe.buildspec.compile_cache import sccache_env_names
from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.families import profile
from condapipe.facts.run_exports import run_spec
from condapipe.render.families._common import (
    PYTHON_RUN,
    CatalogSelection,
    common_value,
    compile_cache_values,
    family_data,
    per_job_mib,
    promise_extra,
    render_template,
    select_catalog,
    variant_matrix,
)
from condapipe.render.model import (
    ALWAYS,
    About,
    Dep,
    DownPrioritize,
    RecipeModel,
    Requirements,
    Script,
    SourceRef,
    Tests,
    When,
)

NONE = "none"  # placeholder value of CUDA-only variant keys in the CPU variant

CUDA_CHECK = (
    "python -c \"import torch; v = torch.version.cuda or 'cpu'; "
    "assert v == '{{ cuda_version }}', 'torch.version.cuda is %s' % v\""
)
# numpy is a run requirement because torch's C API is compiled against it: without it torch warns
# "Failed to initialize NumPy" and from_numpy fails (the 2026-11-27 real package).
NUMPY_CHECK = (
    'python -c "import numpy, torch; '
    "assert torch.from_numpy(numpy.arange(3.0)).sum().item() == 3.0, 'torch.from_numpy'\""
)
# get_arch_list() is empty without a GPU; the comparison runs where a GPU is present.
ARCH_CHECK = (
    "python -c \"import torch; want = sorted(a for a in '{{ torch_arch_names }}'.split() if a != 'none'); "
    "got = sorted(torch.cuda.get_arch_list()) if torch.cuda.is_available() else want; "
    "assert got == want, 'arch list %s, expected %s' % (got, want)\""
)


def variant_row(variant: CudaVariant) -> dict[str, str]:
    """The zipped variant keys of one CUDA variant (CUDA-only keys are NONE for cpu)."""
    if variant.is_cpu or variant.archs is None:
        return {
            "cuda_version": "cpu",
            "cudnn_version": NONE,
            "build_tag": "cpu",
            "torch_variant": "cpu",
            "torch_cuda_arch_list": NONE,
            "torch_arch_names": NONE,
            "torch_nvcc_flags": NONE,
            "build_split_cuda": "OFF",
            "use_static_cudnn": "0",
            "magma_package": NONE,
            "cuda_run_constraint": NONE,
        }
    cudnn = variant.cudnn or NONE
    return {
        "cuda_version": variant.cuda,
        "cudnn_version": cudnn,
        "build_tag": f"cuda{variant.cuda}_cudnn{cudnn}",
        "torch_variant": "cuda",
        "torch_cuda_arch_list": variant.archs.torch_arch_list(),
        "torch_arch_names": " ".join(sorted(variant.archs.sass() | variant.archs.ptx())),
        "torch_nvcc_flags": " ".join(variant.nvcc_flags),
        "build_split_cuda": "ON" if variant.build_split_cuda else "OFF",
        "use_static_cudnn": "1" if variant.static_cudnn else "0",
        "magma_package": variant.magma.package if variant.magma else NONE,
        "cuda_run_constraint": variant.run_constraint or NONE,
    }


def platform_rows(spec: BuildSpec, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Adapt the variant rows to the target: no magma key where magma has no packages, and for
    a Jetson board its name in the build tag and no CUDA run package (JetPack installs the
    toolkit on the board; conda has none for Tegra). JetPack's dynamic cuDNN is the spec's
    decision (the variant's static_cudnn is off)."""
    drop = set()
    if not has_magma(spec):
        drop.add("magma_package")
    if spec.jetson:
        drop.add("cuda_run_constraint")
    out = []
    for row in rows:
        row = {k: v for k, v in row.items() if k not in drop}
        if spec.jetson and row["cuda_version"] != "cpu":
            row["build_tag"] = f"{row['build_tag']}_{spec.jetson}"
        out.append(row)
    return out


def has_magma(spec: BuildSpec, family: str = "pytorch") -> bool:
    """Whether the family's CUDA variants link magma on the target platform: its profile's
    prerequisites name magma there (where magma-cudaXY packages exist; the plan builds it first)."""
    return "magma" in profile(family).prerequisites_on(spec.platform)


def missing_dso_allowlist(spec: BuildSpec, data: dict) -> tuple[str, ...]:
    """The family's allowlist, plus JetPack's libraries for a Jetson board."""
    extra: tuple[str, ...] = ()
    if spec.jetson:
        from condapipe.facts.jetson import profile

        extra = profile(spec.jetson, spec.cudas[0]).system_libraries
    return tuple(data["missing_dso_allowlist"]) + extra


def _match_spec(name: str, pin: str) -> str:
    """Table pin -> match spec: "" unpinned, "1.23.5" means conda's `=1.23.5` (1.23.5.*)."""
    if not pin:
        return name
    if pin[0].isdigit() and not pin.endswith("*") and "," not in pin:
        return f"{name} {pin}.*"
    return f"{name} {pin}"


def _pinned(
    name: str,
    series: tables.PytorchInfo,
    pythons: Sequence[str],
    package: str | None = None,
    *,
    to_spec: Callable[[str, str], str] = _match_spec,
) -> list[Dep]:
    """One dep, or one per Python when the pin differs between the spec's Pythons.

    `package` asks for another package at `name`'s pin (mkl-devel at the mkl pin); `to_spec` turns
    (package, pin) into the match spec (the host pin itself, or the run range it exports)."""
    package = package or name
    per_python = {py: to_spec(package, series.pin(name, py)) for py in pythons} if pythons else {}
    if not per_python:
        return [Dep(to_spec(package, series.pin(name)))]
    if len(set(per_python.values())) == 1:
        return [Dep(next(iter(per_python.values())))]
    return [Dep(spec, When(python=f"=={py}")) for py, spec in per_python.items()]


def _on_platforms(dep: Dep, platforms: Sequence[str]) -> Dep:
    """`dep` restricted to `platforms` (MKL exists only for x86_64), keeping its other conditions."""
    if not platforms:
        return dep
    return Dep(dep.spec, When(platforms=tuple(platforms), python=dep.when.python, cuda=dep.when.cuda))


def _python_when(specifier: str | None, pythons: Sequence[str]) -> When | None:
    """ALWAYS if a python-restricted dep holds for all the spec's Pythons, None if for none."""
    if specifier is None:
        return ALWAYS
    matching = [py for py in pythons if Version(py) in SpecifierSet(specifier)]
    if not matching:
        return None
    return ALWAYS if len(matching) == len(pythons) else When(python=specifier)


def cuda_library_deps(spec: BuildSpec, data: dict, section: str, variants: int) -> list[Dep]:
    """The family's `cuda_host_libraries` (host or run) for each CUDA variant that takes its
    libraries from packages, each spec filled in for that variant (its CUDA, its cuDNN major)."""
    deps: list[Dep] = []
    for variant in spec.cuda_variants:
        if variant.is_cpu or not variant.host_libraries:
            continue
        when = ALWAYS if variants == 1 else When(cuda=(variant.cuda,))
        major = (variant.cudnn or "").split(".")[0]
        for item in data["cuda_host_libraries"][section]:
            if "{cudnn_major}" in item and not major:
                continue
            deps.append(Dep(item.format(cuda=variant.cuda, cudnn_major=major), when))
    return deps


def host_library_cudas(spec: BuildSpec) -> list[str]:
    """The CUDA versions of the spec whose libraries are host packages (build.sh's case list)."""
    return [v.cuda for v in spec.cuda_variants if not v.is_cpu and v.host_libraries]


def _requirements(spec: BuildSpec, series: tables.PytorchInfo, rows: list[dict[str, str]]) -> Requirements:
    data = family_data("pytorch")
    blas = data["blas"][spec.blas]
    cuda_values = tuple(r["cuda_version"] for r in rows if r["cuda_version"] != "cpu")
    has_cpu = any(r["cuda_version"] == "cpu" for r in rows)
    on_cuda = When(cuda=cuda_values) if has_cpu else ALWAYS
    on_cpu = When(cuda=("cpu",)) if cuda_values else ALWAYS

    host: list[Dep] = [Dep("python")]
    host += _pinned("numpy", series, spec.pythons)
    host += _pinned("setuptools", series, spec.pythons)
    host += _pinned("typing_extensions", series, spec.pythons)
    host += [Dep(name) for name in data["host_requirements"]]
    if series.build_command.startswith("pip "):
        host.append(Dep("pip"))
    blas_host = _pinned("mkl", series, spec.pythons, blas.get("pinned_host")) if spec.blas == "mkl" else []
    blas_host += [Dep(name) for name in blas.get("host", ())]
    host += [_on_platforms(d, blas.get("platforms", ())) for d in blas_host]
    if cuda_values and has_magma(spec):
        host.append(Dep("{{ magma_package }}", on_cuda))
    host += cuda_library_deps(spec, data, "host", len(rows))

    # What the build compiled against and links at run time: numpy's C API and MKL, in the range
    # their run_exports give (data/run_exports.yaml), never looser than what the binary needs.
    run: list[Dep] = [PYTHON_RUN]
    run += _pinned("numpy", series, spec.pythons, to_spec=run_spec)
    if spec.blas == "mkl":
        run += [
            _on_platforms(d, blas.get("platforms", ()))
            for d in _pinned("mkl", series, spec.pythons, to_spec=run_spec)
        ]
    for dep in series.run_deps:
        if dep.blas is not None and dep.blas != spec.blas:
            continue
        when = _python_when(dep.python, spec.pythons)
        if when is not None:
            platforms = blas.get("platforms", ()) if dep.blas is not None else ()
            run.append(_on_platforms(Dep(dep.spec, when), platforms))
    if cuda_values and not spec.jetson:
        run.append(Dep("{{ cuda_run_constraint }}", on_cuda))
    run += cuda_library_deps(spec, data, "run", len(rows))

    # Mutex scheme of builder#823, as constraints: pytorch-mutex and cpuonly exist only in PyTorch's
    # frozen channel, so the package needs neither (it installs from conda-forge alone, where the
    # build string's cpu/cuda tag selects the variant), yet in an environment that has PyTorch's
    # mutex, it must be this variant's; a CPU build accepts cpuonly, a CUDA build forbids it. (The
    # older cpuonly-feature era is down-prioritizing, see build_model.)
    constrained: list[Dep] = []
    if series.mutex == "pytorch-mutex":
        constrained.append(Dep("pytorch-mutex ==1.0 {{ torch_variant }}"))
        if has_cpu:
            constrained.append(Dep("cpuonly", on_cpu))
        if cuda_values:
            constrained.append(Dep("cpuonly <0", on_cuda))
    return Requirements(
        build=tuple(Dep(name) for name in data["build_requirements"]),
        host=tuple(host),
        run=tuple(run),
        run_constrained=tuple(constrained),
    )


def source_ref(spec: BuildSpec, data: dict) -> SourceRef:
    src = spec.source
    if src.kind == "path":
        return SourceRef(path=src.path)
    if src.kind == "url":
        return SourceRef(url=src.url, sha256=src.sha256)
    return SourceRef(git_url=src.url or data["git_url"], git_rev=src.rev or f"v{spec.version}")


def _build_command(command: str) -> str:
    """Table build command -> the line in build.sh (pip through the host Python)."""
    return f"python -m {command}" if command.startswith("pip ") else command


def torch_env(spec: BuildSpec, data: dict, catalog: CatalogSelection, *, magma_off: str) -> dict[str, str]:
    """Script env shared by the pytorch and libtorch families. Later sources win: family constants <
    patch catalog < the spec's env (which already holds the series' required env from pytorch.yaml
    and a Jetson profile's, overridable by --env). `magma_off` is how the build spells USE_MAGMA off
    (setup.py reads "0", a direct CMake call "OFF")."""
    env: dict[str, str] = dict(data["constant_env"])
    # Hermetic: what CMake would detect on the build machine is decided, not found (one list, in
    # pytorch's profile: libtorch compiles the same CMake).
    env.update(dict.fromkeys(family_data("pytorch")["system_detected_off"], magma_off))
    env["BLAS"] = data["blas"][spec.blas]["setting"]
    if not has_magma(spec) and any(not v.is_cpu for v in spec.cuda_variants):
        env["USE_MAGMA"] = magma_off
    env.update(catalog.env)
    env.update(spec.extra_env)
    return env


def about(data: dict) -> About:
    """The about section from a family's family.yaml."""
    return About(
        home=data["home"],
        license=data["license"],
        license_file=data["license_file"],
        summary=data["summary"],
        dev_url=data["dev_url"],
    )


def _forwarding(forwards: dict[str, Any]) -> dict[str, str]:
    """The case patterns of build.sh's CMAKE_ARGS translation, from the profile's setup_py_forwards
    (identifiers only: they become bash case patterns and variable names)."""
    words = [*forwards["prefixes"], *forwards["names"], *forwards["setup_owns"]]
    bad = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(w))]
    if bad:
        raise UsageError(f"pytorch profile: setup_py_forwards holds non-identifiers: {bad}")
    return {
        "forwarded_prefixes": ", ".join(f"{p}" for p in forwards["prefixes"]),
        "forwarded_patterns": "|".join([f"{p}*" for p in forwards["prefixes"]] + list(forwards["names"])),
        "setup_owns": "|".join(forwards["setup_owns"]),
    }


def build_model(spec: BuildSpec) -> RecipeModel:
    """The recipe of one pytorch spec (all its Pythons and CUDA variants)."""
    data = family_data("pytorch")
    series = tables.pytorch_info(spec.version)
    rows = platform_rows(spec, [variant_row(v) for v in spec.cuda_variants])
    catalog = select_catalog(spec, "pytorch", {c: spec.version for c in spec.cudas})

    env = torch_env(spec, data, catalog, magma_off="0")

    body = render_template(
        "pytorch/build.sh.j2",
        **per_job_mib("pytorch", spec.version),
        static_nccl=series.static_nccl,
        split_cuda_read=series.build_split_cuda,
        env_by_cuda=catalog.env_by_cuda,
        build_command=_build_command(series.build_command),
        **_forwarding(data["setup_py_forwards"]),
        system_cudnn=bool(spec.jetson),
        host_library_cudas=host_library_cudas(spec),
        cuda_root_headers=data["cuda_host_libraries"]["headers"],
        launchers_as_args=False,
        answers_launcher_searches=True,
        **compile_cache_values("${PKG_NAME}-${PKG_VERSION}-${build_tag}"),
    )
    has_cpu = "cpu" in spec.cudas
    down = None
    if series.mutex == "cpuonly-feature" and has_cpu:
        down = DownPrioritize("cpuonly", When(cuda=("cpu",)) if len(rows) > 1 else ALWAYS)
    tag = common_value(rows, "build_tag")
    tests = [CUDA_CHECK, NUMPY_CHECK]
    if common_value(rows, "cuda_version") != "cpu":
        tests.append(ARCH_CHECK)
    return RecipeModel(
        name="pytorch",
        version=spec.version,
        build_number=spec.build_number,
        build_string=f"py{{{{ python }}}}_{tag or '{{ build_tag }}'}_{spec.build_number}",
        source=dataclasses.replace(source_ref(spec, data), patches=catalog.patches),
        script=Script(
            env=tuple(env.items()),
            body=body,
            passthrough=tuple(data["passthrough"]),
            secrets=sccache_env_names(),
        ),
        requirements=_requirements(spec, series, rows),
        tests=Tests(imports=("torch",), commands=tuple(tests)),
        about=about(data),
        variants=variant_matrix(spec.pythons, rows),
        detect_binary_prefix=False,
        missing_dso_allowlist=missing_dso_allowlist(spec, data),
        down_prioritize=down,
        extra=promise_extra(rows, archs_key="torch_cuda_arch_list"),
    )

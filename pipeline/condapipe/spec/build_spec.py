"""BuildSpec: the one validated description of what to build.

Everything downstream (render, engines, fix, verify, plan) reads a BuildSpec and nothing
else from the user, so all validation of user input happens while building one.

`build_spec(package, settings)` turns already-merged settings (config file overridden by CLI
flags, see condapipe.spec.options) into a BuildSpec, using the data tables for defaults.
What each package family requires is data too (data/spec_families.yaml).

magma and several CUDAs: one recipe has one version, so when the CUDAs map to different
upstream magma versions in cuda.yaml (e.g. 11.0 -> 2.5.2, 11.8 -> 2.6.1) without an explicit
--version, that is a UsageError asking for separate renders or an explicit --version; with
--version, every variant builds that version (a warning names the CUDAs whose table differs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML

from condapipe.errors import UsageError
from condapipe.spec import tables
from condapipe.spec.arch import ArchList, parse_arch_list

CPU = "cpu"
PLATFORMS = ("linux-64", "linux-aarch64")
BLAS_BY_PLATFORM = {"linux-64": ("mkl", "openblas"), "linux-aarch64": ("openblas",)}
DEFAULT_PLATFORM = "linux-64"

_CUDNN = re.compile(r"^\d+(\.\d+){0,3}$")
_PYTHON = re.compile(r"^(?:py|python)?(?P<major>[23])\.?(?P<minor>\d{1,2})(?:\.\d+)?$", re.IGNORECASE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Source:
    """Where the upstream source comes from.

    kind: "git" (url + rev, with submodules), "path" (a local checkout, --source DIR),
    "url" (a tarball, url + sha256) or "none" (the recipe folder carries its own sources).
    """

    kind: str  # "git" | "path" | "url" | "none"
    url: str | None = None  # git URL or tarball URL
    rev: str | None = None  # git tag/commit, e.g. "v1.8.0"
    path: Path | None = None  # local checkout (--source DIR)
    sha256: str | None = None  # for tarballs

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "url": self.url,
            "rev": self.rev,
            "path": str(self.path) if self.path else None,
            "sha256": self.sha256,
        }


@dataclass(frozen=True)
class CudaVariant:
    """One CUDA axis value of the variant matrix, with its resolved arch list and cuDNN."""

    cuda: str  # "11.0", "12.8", ... or "cpu"
    archs: ArchList | None  # None for cpu
    cudnn: str | None  # e.g. "8.0.5"; None for cpu and for families without cuDNN
    build_split_cuda: bool = False  # set BUILD_SPLIT_CUDA=ON (pytorch series has it, CUDA needs it)
    static_cudnn: bool = False  # USE_STATIC_CUDNN=1 (series wants it and a static cuDNN exists)

    @property
    def is_cpu(self) -> bool:
        return self.cuda == CPU

    def to_dict(self) -> dict[str, Any]:
        return {
            "cuda": self.cuda,
            "archs": self.archs.to_dict() if self.archs is not None else None,
            "cudnn": self.cudnn,
            "build_split_cuda": self.build_split_cuda,
            "static_cudnn": self.static_cudnn,
        }


@dataclass(frozen=True)
class BuildSpec:
    """A fully resolved, validated build request (CLI flags over config file over data tables)."""

    package: str  # "pytorch" | "magma" | "cuda-smoke" | ... (a recipe family under recipes/)
    version: str  # upstream version, e.g. "1.8.0" (magma: the magma version picked per CUDA)
    build_number: int
    pythons: tuple[str, ...]  # e.g. ("3.8",); empty for packages without Python (magma)
    cuda_variants: tuple[CudaVariant, ...]
    platform: str  # "linux-64" | "linux-aarch64"
    blas: str  # "mkl" | "openblas"
    source: Source
    # Environment for build.sh: the series' required env (pytorch.yaml extra_env) overridden
    # by the user's [env] table / --env, sorted by name.
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # Things the user should know but that do not stop the build (CLI prints them).
    warnings: tuple[str, ...] = field(default_factory=tuple, compare=False)
    # --jetson BOARD: the build targets that board with the CUDA/cuDNN of its JetPack
    # (condapipe.spec.jetson, data/jetson.yaml); None for every other build.
    jetson: str | None = None

    @property
    def cudas(self) -> tuple[str, ...]:
        return tuple(v.cuda for v in self.cuda_variants)

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "build_number": self.build_number,
            "pythons": list(self.pythons),
            "cuda_variants": [v.to_dict() for v in self.cuda_variants],
            "platform": self.platform,
            "blas": self.blas,
            "source": self.source.to_dict(),
            "extra_env": dict(self.extra_env),
            "warnings": list(self.warnings),
            "jetson": self.jetson,
        }


# ------------------------------------------------------------------------- family rules


@dataclass(frozen=True)
class FamilyRules:
    """One entry of data/spec_families.yaml."""

    version: str
    python: str
    cuda: str
    cpu_allowed: bool
    cudnn: bool
    arch_default: str
    ptx: bool
    link_overflow_check: bool
    blas: bool
    source: tuple[tuple[str, str], ...]


@cache
def _family_table() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("spec_families.yaml").read_text()
    return YAML(typ="safe").load(text)


def _rules(raw: dict[str, Any]) -> FamilyRules:
    return FamilyRules(
        version=str(raw["version"]),
        python=raw["python"],
        cuda=raw["cuda"],
        cpu_allowed=bool(raw["cpu_allowed"]),
        cudnn=bool(raw["cudnn"]),
        arch_default=raw["arch_default"],
        ptx=bool(raw["ptx"]),
        link_overflow_check=bool(raw["link_overflow_check"]),
        blas=bool(raw["blas"]),
        source=tuple(sorted((k, str(v)) for k, v in raw["source"].items())),
    )


def known_packages() -> tuple[str, ...]:
    """Families with rules, a folder under recipes/, or a condapipe.render.families module."""
    names = set(_family_table()["families"])
    recipes = resources.files("condapipe.recipes")
    names.update(
        p.name
        for p in recipes.iterdir()
        if p.is_dir() and not p.name.startswith(("_", ".")) and p.name != "common"
    )
    try:
        from condapipe.render.families import known_families

        names.update(known_families())
    except ImportError:  # render area not installed: recipes/ and the rules table still count
        pass
    return tuple(sorted(names))


def family_rules(package: str) -> FamilyRules:
    """Validation rules of ``package``; UsageError listing the known packages if unknown."""
    if package not in known_packages():
        raise UsageError(f"unknown package {package!r}; choose one of {', '.join(known_packages())}")
    table = _family_table()
    return _rules({**table["default"], **table["families"].get(package, {})})


# ------------------------------------------------------------------------- helpers


def normalize_python(text: str) -> str:
    """ "3.8", "38", "py3.8", "3.8.10" -> "3.8"."""
    m = _PYTHON.match(text.strip())
    if not m:
        raise UsageError(f"cannot read Python version {text!r}; write it like 3.10")
    return f"{m['major']}.{m['minor']}"


def _as_list(value: Any) -> list[str]:
    """A flag given once, repeated, or as "3.10,3.11" / "3.10 3.11" -> ["3.10", "3.11"]."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else [str(v) for v in value]
    return [v for item in items for v in re.split(r"[,\s]+", item.strip()) if v]


def _unique(items: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def _build_number(value: Any) -> int:
    if value is None:
        return 0
    text = str(value).strip()
    if not text.isdigit():
        raise UsageError(f"--build-number must be a non-negative integer, not {value!r}")
    return int(text)


def _platform_and_blas(settings: dict[str, Any], rules: FamilyRules) -> tuple[str, str]:
    platform = settings.get("platform") or DEFAULT_PLATFORM
    if platform not in PLATFORMS:
        raise UsageError(f"unknown platform {platform!r}; valid: {' '.join(PLATFORMS)}")
    allowed = BLAS_BY_PLATFORM[platform]
    blas = settings.get("blas")
    if blas is None:
        return platform, allowed[0]
    if blas not in ("mkl", "openblas"):
        raise UsageError(f"unknown BLAS {blas!r}; valid: mkl openblas")
    if blas not in allowed:
        raise UsageError(f"BLAS {blas} is not available on {platform}; valid there: {' '.join(allowed)}")
    return platform, blas


def _env(settings: dict[str, Any], base: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    env = dict(base)
    for key, value in (settings.get("env") or {}).items():
        if not _ENV_NAME.match(str(key)):
            raise UsageError(f"invalid environment variable name {key!r}")
        env[str(key)] = str(value)
    return tuple(sorted(env.items()))


def _source(
    settings: dict[str, Any], rules: FamilyRules, version: str, magma: tables.MagmaInfo | None
) -> Source:
    given = settings.get("source")
    if given:
        text = str(given)
        if text.startswith("git+"):
            url, _, rev = text[4:].partition("@")
            return Source(kind="git", url=url, rev=rev or None)
        if re.match(r"^https?://", text):
            return Source(kind="url", url=text)
        path = Path(text).expanduser()
        if not path.is_dir():
            raise UsageError(f"--source {text}: no such directory")
        return Source(kind="path", path=path.resolve())
    src = dict(rules.source)
    if src["kind"] == "git":
        return Source(kind="git", url=src["url"], rev=src["rev"].format(version=version))
    if src["kind"] == "magma" and magma is not None:
        return Source(kind="url", url=magma.url, sha256=magma.sha256)
    return Source(kind="none")


# ------------------------------------------------------------------------- build_spec


def build_spec(
    package: str, settings: dict[str, Any], *, from_cli: frozenset[str] = frozenset()
) -> BuildSpec:
    """Validate merged settings (keys of config_file.SPEC_KEYS) for ``package`` into a BuildSpec.

    ``from_cli`` names the keys the user typed as flags: a flag that does not apply to the
    family is an error, while the same key from a shared config file is ignored.
    """
    rules = family_rules(package)
    warnings: list[str] = []
    jetson = None
    if settings.get("jetson"):
        from condapipe.spec import jetson as jetson_profiles

        if package in jetson_profiles.families() or "jetson" in from_cli:
            settings, profile = jetson_profiles.apply_profile(
                package, settings, pytorch_versioned=rules.version == "pytorch"
            )
            jetson = profile.board

    # --- CUDA axis
    cudas = _unique([tables.normalize_cuda(c) for c in _as_list(settings.get("cuda"))])
    if not cudas:
        if rules.cuda == "required":
            hint = "X.Y or cpu" if rules.cpu_allowed else "X.Y"
            raise UsageError(
                f"{package} needs --cuda {hint}; valid: "
                f"{'cpu ' if rules.cpu_allowed else ''}{' '.join(tables.cuda_versions())}"
            )
        cudas = [CPU]
    if CPU in cudas and not rules.cpu_allowed:
        raise UsageError(f"{package} is a CUDA package: --cuda cpu is not valid for it")

    # --- version
    version, torch = _version(package, rules, settings, cudas, warnings)

    # --- Pythons
    pythons = _pythons(package, rules, settings, torch, from_cli)

    # --- platform, BLAS
    if not rules.blas and "blas" in from_cli:
        raise UsageError(f"--blas does not apply to {package}")
    platform, blas = _platform_and_blas(settings, rules)

    # --- cuDNN
    cudnn = settings.get("cudnn")
    if cudnn is not None:
        if not rules.cudnn:
            if "cudnn" in from_cli:
                raise UsageError(f"--cudnn does not apply to {package}")
            cudnn = None
        elif not _CUDNN.match(str(cudnn)):
            raise UsageError(f"cannot read cuDNN version {cudnn!r}; write it like 8.9.2")

    # --- variants
    arch_text = settings.get("arch")
    if isinstance(arch_text, list):
        arch_text = ";".join(arch_text)
    if arch_text is not None and not str(arch_text).strip():
        raise UsageError("empty --arch: give archs like '8.0;8.6+PTX', a family name or native")
    if arch_text is not None and cudas == [CPU]:
        if "arch" in from_cli:
            raise UsageError("cpu builds have no arch list: drop --arch or give --cuda X.Y")
        arch_text = None  # a shared config file's arch list does not apply to a cpu build
    variants = tuple(_variant(c, rules, torch, arch_text, cudnn, warnings, package) for c in cudas)

    magma = tables.cuda_info(cudas[0]).magma if rules.version == "magma" else None
    source = _source(settings, rules, version, magma)
    if (
        rules.version == "magma"
        and source.kind == "url"
        and source.sha256 is None
        and not settings.get("source")
    ):
        warnings.append(f"magma {version}: no sha256 known for {source.url}; the download is not verified")
    extra_env = _env(settings, torch.extra_env if torch else ())
    if torch is not None:
        _check_cudas_shipped(version, torch, cudas, warnings)
    return BuildSpec(
        package=package,
        version=version,
        build_number=_build_number(settings.get("build_number")),
        pythons=tuple(pythons),
        cuda_variants=variants,
        platform=platform,
        blas=blas,
        source=source,
        extra_env=extra_env,
        warnings=tuple(warnings),
        jetson=jetson,
    )


def _version(
    package: str, rules: FamilyRules, settings: dict[str, Any], cudas: list[str], warnings: list[str]
) -> tuple[str, tables.PytorchInfo | None]:
    given = settings.get("version")
    given = str(given).strip() if given is not None else None
    if rules.version == "pytorch":
        if not given:
            raise UsageError(f"{package} needs --version; valid: {' '.join(tables.pytorch_versions())}")
        return given, tables.pytorch_info(given)
    if rules.version == "magma":
        per_cuda = {c: tables.cuda_info(c).magma.version for c in cudas}
        distinct = sorted(set(per_cuda.values()), key=Version)
        if given:
            _check_version_text(given)
            differ = [c for c, v in per_cuda.items() if v != given]
            if differ:
                warnings.append(
                    f"magma {given} requested; the table has another magma version for CUDA "
                    f"{' '.join(differ)} ({' '.join(per_cuda[c] for c in differ)})"
                )
            return given, None
        if len(distinct) > 1:
            groups = "; ".join(f"{v} for {' '.join(c for c in cudas if per_cuda[c] == v)}" for v in distinct)
            raise UsageError(
                f"these CUDAs use different magma versions ({groups}): render them separately "
                "or pass --version"
            )
        return distinct[0], None
    if rules.version == "required":
        if not given:
            raise UsageError(f"{package} needs --version")
        _check_version_text(given)
        return given, None
    if given:
        _check_version_text(given)
    return given or rules.version, None


def _check_version_text(text: str) -> None:
    try:
        Version(text)
    except InvalidVersion:
        raise UsageError(f"invalid version {text!r}; write it like 1.2.3") from None


def _pythons(
    package: str,
    rules: FamilyRules,
    settings: dict[str, Any],
    torch: tables.PytorchInfo | None,
    from_cli: frozenset[str],
) -> list[str]:
    raw = _as_list(settings.get("python"))
    if rules.python == "none":
        if raw and "python" in from_cli:
            raise UsageError(f"{package} has no Python variants: drop --python")
        return []
    pythons = _unique([normalize_python(p) for p in raw])
    valid = torch.pythons if torch is not None else None
    if not pythons:
        if rules.python == "required":
            choices = f"; valid: {' '.join(valid)}" if valid else ""
            raise UsageError(f"{package} needs --python{choices}")
        return []
    if valid is not None:
        bad = [p for p in pythons if p not in valid]
        if bad:
            raise UsageError(
                f"{package} {torch.series if torch else ''} does not support Python "
                f"{' '.join(bad)}; valid: {' '.join(valid)}"
            )
    return sorted(pythons, key=Version)


def _variant(
    cuda: str,
    rules: FamilyRules,
    torch: tables.PytorchInfo | None,
    arch_text: str | None,
    cudnn: str | None,
    warnings: list[str],
    package: str,
) -> CudaVariant:
    if cuda == CPU:
        return CudaVariant(cuda=CPU, archs=None, cudnn=None)
    info = tables.cuda_info(cuda)
    if arch_text is not None:
        archs = parse_arch_list(str(arch_text), cuda=cuda)
    elif rules.arch_default == "magma":
        archs = info.magma_arch_list()
    elif rules.arch_default == "torch":
        archs = info.default_archs()
    else:
        raise UsageError(f"{package} needs --arch for CUDA builds")
    if not rules.ptx and archs.ptx():
        warnings.append(f"{package} ships SASS only: dropped PTX for {' '.join(sorted(archs.ptx()))}")
        archs = archs.sass_only()
    split_available = torch is not None and torch.build_split_cuda
    too_long = archs.images > tables.link_overflow_max_images()
    if rules.link_overflow_check:
        overflow = link_overflow_warning(archs, cuda, split_available=split_available)
        if overflow:
            warnings.append(overflow)
    split = split_available and (info.build_split_cuda or too_long)
    static_cudnn = bool(torch is not None and torch.static_cudnn and info.cudnn_static_available)
    return CudaVariant(
        cuda=cuda,
        archs=archs,
        cudnn=(cudnn or info.cudnn) if rules.cudnn else None,
        build_split_cuda=split,
        static_cudnn=static_cudnn and rules.cudnn,
    )


def link_overflow_warning(archs: ArchList, cuda: str, *, split_available: bool) -> str | None:
    """The warning for an arch list long enough to risk the 2 GB link overflow, or None.

    With BUILD_SPLIT_CUDA available the spec turns the split on instead, so there is no risk.
    """
    limit = tables.link_overflow_max_images()
    if archs.images <= limit or split_available:
        return None
    return (
        f"CUDA {cuda}: {archs.images} code images (archs + PTX) exceed {limit}; libtorch_cuda.so "
        "may pass 2 GB and fail to link ('relocation truncated to fit'), and BUILD_SPLIT_CUDA is "
        "not available in this version: shorten --arch"
    )


def _check_cudas_shipped(
    version: str, torch: tables.PytorchInfo, cudas: list[str], warnings: list[str]
) -> None:
    unshipped = [c for c in cudas if c != CPU and c not in torch.cudas]
    if unshipped:
        warnings.append(
            f"pytorch {version} was not released upstream for CUDA {' '.join(unshipped)} "
            f"(upstream: {' '.join(torch.cudas)}); building it anyway"
        )

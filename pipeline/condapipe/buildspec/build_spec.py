"""BuildSpec: the one validated description of what to build.

Everything downstream (render, engines, fix, verify, plan) reads a BuildSpec and nothing
else from the user, so all validation of user input happens while building one.

`build_spec(package, settings)` turns already-merged settings (config file overridden by CLI
flags, see condapipe.buildspec.settings) into a BuildSpec, using the data tables for defaults.
What each package family requires is data too (its profile, recipes/<family>/family.yaml, read
by condapipe.facts.families, the one family registry); every CUDA fact of a variant is decided in
condapipe.buildspec.variant, so nothing downstream reads the CUDA table.

magma and several CUDAs: one recipe has one version, so when the CUDAs map to different
upstream magma versions in cuda.yaml (e.g. 11.0 -> 2.5.2, 11.8 -> 2.6.1) without an explicit
--version, that is a UsageError asking for separate renders or an explicit --version; with
--version, every variant builds that version (a warning names the CUDAs whose table differs).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from condapipe.buildspec import pairs
from condapipe.buildspec.variant import CudaVariant, link_overflow_warning, resolve_variant
from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.families import FamilyRules, family_rules, known_packages
from condapipe.hashing import hash_file

CPU = "cpu"
PLATFORMS = ("linux-64", "linux-aarch64")
BLAS_BY_PLATFORM = {"linux-64": ("mkl", "openblas"), "linux-aarch64": ("openblas",)}
DEFAULT_PLATFORM = "linux-64"

_CUDNN = re.compile(r"^\d+(\.\d+){0,3}$")
_PYTHON = re.compile(r"^(?:py|python)?(?P<major>[23])\.?(?P<minor>\d{1,2})(?:\.\d+)?$", re.IGNORECASE)
SOURCE_ARCHIVES = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".zip")
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
    https_url: str | None = None  # the tarball over https, for fetching it by hand (magma's is http)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "url": self.url,
            "rev": self.rev,
            "path": str(self.path) if self.path else None,
            "sha256": self.sha256,
            "https_url": self.https_url,
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
    # (condapipe.facts.jetson, data/jetson.yaml); None for every other build.
    jetson: str | None = None
    # The exact builds of other families this package is built against, (family, build): a build
    # number of that family's own build string (torchvision built in one plan with its pytorch), or
    # a whole build string (a package made elsewhere, e.g. a repackaged wheel). () when the family
    # builds against none, or against any build number (a torchvision built alone).
    against: tuple[tuple[str, str], ...] = ()

    @property
    def cudas(self) -> tuple[str, ...]:
        return tuple(v.cuda for v in self.cuda_variants)

    def with_toolkit_roots(self, roots: Mapping[str, str]) -> BuildSpec:
        """The same spec with each CUDA's toolkit root on this machine (doctor's switch to a
        /usr/local/cuda-X.Y), carried by its resolved variant."""
        if not roots:
            return self
        variants = tuple(
            dataclasses.replace(v, toolkit_root=roots[v.cuda]) if v.cuda in roots else v
            for v in self.cuda_variants
        )
        return dataclasses.replace(self, cuda_variants=variants)

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
            **({"against": dict(self.against)} if self.against else {}),
        }


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
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) > MAX_BUILD_NUMBER:
        raise UsageError(
            f"--build-number must be a non-negative integer (at most {MAX_BUILD_NUMBER}), not {value!r}"
        )
    return int(text)


def _default_build_number(value: Any, rules: FamilyRules, version: str, cudas: list[str]) -> int:
    """--build-number, else the family's versioning's (the CUDA table's for the package it names,
    else 0). The one place a build number defaults: `render magma`, `build magma` and the pytorch
    plan's magma prerequisite all get it here."""
    if value is not None:
        return _build_number(value)
    return rules.version.default_build_number(version, cudas)


MAX_BUILD_NUMBER = 2**31 - 1  # conda stores build numbers as 32-bit integers
_CUDA_FORM = re.compile(r"^(?:cpu|\d{1,2}\.\d{1,2})$", re.IGNORECASE)
_PYTHON_FORM = re.compile(r"^3\.\d{1,2}$")


def cuda_axis(value: Any) -> list[str]:
    """--cuda as given (repeated, "12.4,12.6" or "12.4 12.6", the config file's list) -> the CUDA
    versions, each written X.Y (or cpu), known to the CUDA table, each once, in the order given.

    The one place the axis is read: the settings cascade (condapipe.buildspec.settings) calls it,
    and defaults, Jetson profiles and build_spec take its result as it is."""
    items = [value] if isinstance(value, str) else list(value or ())
    if any(isinstance(v, str) and not v.strip() for v in items):
        raise UsageError("--cuda: an empty value is not valid")
    out: list[str] = []
    for item in _as_list(items):
        if not _CUDA_FORM.match(item):
            raise UsageError(f"--cuda {item!r}: write the CUDA version as X.Y (e.g. 12.4) or cpu")
        out.append(tables.normalize_cuda(item))
    return _unique(out)


def check_forms(settings: dict[str, Any]) -> None:
    """Values are written one way: X.Y for Python (not py3.10 or 3.10.1), none empty; CUDA's form is
    cuda_axis's, in the settings cascade.

    A near miss that was silently rewritten would be a build of something the user did not type.
    """
    for key, value in settings.items():
        items = value if isinstance(value, list) else [value]
        if key not in ("env", "arch") and any(isinstance(v, str) and not v.strip() for v in items):
            raise UsageError(f"--{key.replace('_', '-')}: an empty value is not valid")
    for item in _as_list(settings.get("python")):
        if re.match(r"^[0-24-9]\.\d{1,2}$", item):  # X.Y already: the advice to write X.Y cannot help
            raise UsageError(
                f"--python {item}: condapipe builds for Python 3 only (every PyTorch release it knows "
                "needs 3.x); give a 3.x version, e.g. --python 3.10"
            )
        if not _PYTHON_FORM.match(item):
            raise UsageError(f"cannot read Python version {item!r}; write it like 3.10 (X.Y)")
    _build_number(settings.get("build_number"))


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
        if path.is_file() and path.name.endswith(SOURCE_ARCHIVES):
            # A local release tarball: a file:// URL with its sha256, unpacked by the engine.
            return Source(kind="url", url=path.resolve().as_uri(), sha256=hash_file(path).sha256)
        if not path.is_dir():
            raise UsageError(
                f"--source {text}: no such directory (or source archive: {', '.join(SOURCE_ARCHIVES)})"
            )
        if path.resolve() == Path("/"):  # its fingerprint would walk the whole filesystem
            raise UsageError(f"--source {text}: the filesystem root is not a source checkout")
        return Source(kind="path", path=path.resolve())
    src = dict(rules.source)
    if src["kind"] == "git":
        return Source(kind="git", url=src["url"], rev=src["rev"].format(version=version))
    if src["kind"] == "magma" and magma is not None:
        return Source(kind="url", url=magma.url, sha256=magma.sha256, https_url=magma.https_url)
    return Source(kind="none")


# ------------------------------------------------------------------------- build_spec


def build_spec(
    package: str, settings: dict[str, Any], *, from_cli: frozenset[str] = frozenset()
) -> BuildSpec:
    """Validate merged settings (keys of config_file.SPEC_KEYS) for ``package`` into a BuildSpec.

    ``from_cli`` names the keys the user typed as flags: a flag that does not apply to the
    family is an error, while the same key from a shared config file is ignored. ``settings["cuda"]``
    is the CUDA axis as the settings cascade resolved it (cuda_axis: X.Y or cpu, each once), taken
    as it is.
    """
    rules = family_rules(package)
    check_forms(settings)
    warnings: list[str] = []
    jetson = None
    if settings.get("jetson"):
        from condapipe.facts import jetson as jetson_profiles

        if package in jetson_profiles.families() or "jetson" in from_cli:
            settings, profile = jetson_profiles.apply_profile(
                package, settings, pytorch_versioned=rules.version.torch_release
            )
            jetson = profile.board

    # --- CUDA axis (read once, by the settings cascade: cuda_axis)
    axis = settings.get("cuda")
    if isinstance(axis, str):  # a caller's mistake, not the user's: text is cuda_axis's to read
        raise TypeError("build_spec takes the CUDA axis as cuda_axis resolved it (a sequence), not text")
    cudas = list(axis or ())
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

    # --- version (and, for torch-versioned families, the PyTorch release whose series rules apply)
    given = settings.get("version")
    given = str(given).strip() if given is not None else None
    version, torch = rules.version.resolve(package, given, cudas, warnings)
    torch_version = rules.version.torch_of(version)

    # --- Pythons
    what = rules.version.describe(package, version, torch)
    pythons = _pythons(what, package, rules, settings, torch, from_cli)

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
    variants: list[CudaVariant] = []
    for cuda in cudas:
        variant, notes = resolve_variant(
            cuda,
            package=package,
            rules=rules,
            series=torch,
            arch_text=arch_text,
            cudnn=cudnn,
            system_cudnn=jetson is not None,  # JetPack's dynamic cuDNN, never a static one
        )
        variants.append(variant)
        warnings.extend(notes)

    magma = rules.version.table_package(cudas[0])
    source = _source(settings, rules, version, magma)
    if magma is not None and source.kind == "url" and source.sha256 is None and not settings.get("source"):
        warnings.append(f"magma {version}: no sha256 known for {source.url}; the download is not verified")
    # The series' required env is PyTorch's own build's (a torchvision build takes its ABI from torch).
    extra_env = _env(settings, torch.extra_env if torch and rules.version.torch_release else ())
    if torch is not None:
        for cuda in cudas:  # a pair nothing shows compiling is refused before anything is written
            verdict = pairs.pair_verdict(torch_version, cuda)
            if not verdict.offered:
                raise UsageError(verdict.line())
            if verdict.line():
                warnings.append(verdict.line())
    return BuildSpec(
        package=package,
        version=version,
        build_number=_default_build_number(settings.get("build_number"), rules, version, cudas),
        pythons=tuple(pythons),
        cuda_variants=tuple(variants),
        platform=platform,
        blas=blas,
        source=source,
        extra_env=extra_env,
        warnings=tuple(warnings),
        jetson=jetson,
    )


def _pythons(
    what: str,
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
            raise UsageError(f"{what} does not support Python {' '.join(bad)}; valid: {' '.join(valid)}")
    return sorted(pythons, key=Version)


__all__ = [
    "BuildSpec",
    "CudaVariant",
    "FamilyRules",
    "Source",
    "build_spec",
    "family_rules",
    "known_packages",
    "link_overflow_warning",
    "normalize_python",
]

"""Typed access to the data tables (pipeline/data/cuda.yaml, pytorch.yaml, torchvision.yaml).

Version-dependent knowledge lives in YAML so that supporting a new CUDA or PyTorch release is a
data edit; this module only loads, types and looks entries up, and turns unknown versions into
one-line UsageErrors that list the valid choices. It is the bottom of the spec stage: it imports
nothing of condapipe but errors, so arch parsing (condapipe.facts.arch) can build on it. Only the
spec stage reads the CUDA table; everything downstream gets its facts from the resolved
CudaVariant (condapipe.buildspec.variant).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from ruamel.yaml import YAML

from condapipe.errors import UsageError

CPU = "cpu"


@cache
def _load(name: str) -> dict[str, Any]:
    """The parsed YAML file (cached: treat as read-only)."""
    text = resources.files("condapipe.data").joinpath(name).read_text()
    return YAML(typ="safe").load(text)


@dataclass(frozen=True)
class RunConstraint:
    """The run requirement pinning the CUDA runtime (cudatoolkit / pytorch-cuda / cuda-version)."""

    package: str
    spec: str

    def __str__(self) -> str:
        return f"{self.package} {self.spec}"


@dataclass(frozen=True)
class MagmaInfo:
    """pytorch's magma package for one CUDA: magma-cuda110 2.5.2, build number 1."""

    package: str
    version: str
    build_number: int
    url: str
    sha256: str | None
    https_url: str | None = None  # the same file over https (offered when `url` cannot be fetched)


@dataclass(frozen=True)
class CudaInfo:
    """One row of cuda.yaml."""

    version: str
    torch_arch_list: str
    magma_archs: tuple[int, ...]
    nvcc_flags: tuple[str, ...]
    run_constraint: RunConstraint
    magma: MagmaInfo
    max_gcc: int
    cudnn: str
    cudnn_static_available: bool
    build_split_cuda: bool
    min_arch: str
    max_arch: str
    except_archs: tuple[str, ...]
    suffixed: tuple[tuple[str, tuple[str, ...]], ...]  # (("a", ("9.0", ...)), ("f", (...)))
    host_libraries: bool = False  # math libraries, cuDNN, NCCL as host packages (cuda.yaml)


@cache
def _cuda_rows() -> dict[str, CudaInfo]:
    data = _load("cuda.yaml")
    sources = data["magma_sources"]
    rows: dict[str, CudaInfo] = {}
    for version, row in data["cudas"].items():
        magma = row["magma"]
        src = sources[str(magma["version"])]
        rows[str(version)] = CudaInfo(
            version=str(version),
            torch_arch_list=row["torch_arch_list"],
            magma_archs=tuple(int(n) for n in row["magma_archs"]),
            nvcc_flags=tuple(row["nvcc_flags"]),
            run_constraint=RunConstraint(**row["run_constraint"]),
            magma=MagmaInfo(
                package=magma["package"],
                version=str(magma["version"]),
                build_number=int(magma["build_number"]),
                url=src["url"],
                sha256=src["sha256"],
                https_url=src.get("https_url"),
            ),
            max_gcc=int(row["max_gcc"]),
            cudnn=str(row["cudnn"]),
            cudnn_static_available=bool(row["cudnn_static_available"]),
            build_split_cuda=bool(row["build_split_cuda"]),
            min_arch=str(row["min_arch"]),
            max_arch=str(row["max_arch"]),
            except_archs=tuple(str(a) for a in row["except_archs"]),
            suffixed=tuple((k, tuple(str(c) for c in v)) for k, v in sorted(row["suffixed"].items())),
            host_libraries=bool(row.get("host_libraries", False)),
        )
    return rows


def cuda_versions() -> tuple[str, ...]:
    """All CUDA versions in the table, oldest first."""
    return tuple(_cuda_rows())


def link_overflow_max_images() -> int:
    return int(_load("cuda.yaml")["link_overflow_max_images"])


_CUDA_SPELLINGS = re.compile(r"^(?:cuda|cu)?(?P<body>\d+(?:\.\d+)*)$", re.IGNORECASE)


def normalize_cuda(text: str) -> str:
    """Accept "11.8", "cu118", "cuda11.8", "118", "11.8.0" and "cpu"; return "11.8" or "cpu".

    Raises UsageError listing the known versions when the text is not one of them.
    """
    raw = text.strip()
    if raw.lower() == CPU:
        return CPU
    m = _CUDA_SPELLINGS.match(raw)
    known = cuda_versions()
    if m:
        body = m["body"]
        if "." not in body and len(body) in (2, 3):  # builder's "118" / "92" spelling
            body = f"{body[:-1]}.{body[-1]}"
        parts = body.split(".")
        candidate = ".".join(parts[:2])
        if len(parts) <= 3 and candidate in known:
            return candidate
    raise UsageError(f"unknown CUDA version {text!r}; valid: cpu {' '.join(known)}")


def cuda_info(version: str) -> CudaInfo:
    """The table row of one CUDA version (any spelling normalize_cuda accepts)."""
    norm = normalize_cuda(version)
    if norm == CPU:
        raise UsageError("cpu builds have no CUDA table entry")
    return _cuda_rows()[norm]


# ---------------------------------------------------------------- pytorch.yaml


@dataclass(frozen=True)
class RunDep:
    """One run requirement, optionally only for one BLAS or some Pythons."""

    spec: str
    blas: str | None = None
    python: str | None = None  # PEP 440 specifier on the Python version

    def applies(self, *, python: str | None, blas: str) -> bool:
        if self.blas is not None and self.blas != blas:
            return False
        if self.python is not None and python is not None:
            return Version(python) in SpecifierSet(self.python)
        return True


@dataclass(frozen=True)
class PytorchInfo:
    """One series row of pytorch.yaml."""

    series: str
    versions: tuple[str, ...]
    pythons: tuple[str, ...]
    pins: tuple[tuple[str, str | tuple[tuple[str, str], ...]], ...]
    build_command: str
    static_cudnn: bool
    static_nccl: bool
    extra_env: tuple[tuple[str, str], ...]
    mutex: str
    cudas: tuple[str, ...]
    build_split_cuda: bool
    run_deps: tuple[RunDep, ...]

    def pin(self, name: str, python: str | None = None) -> str:
        """Host pin of ``name`` (conda version spec, "" = unpinned) for ``python``.

        Raises UsageError when the pin depends on the Python and none (or an unsupported one)
        is given.
        """
        value = dict(self.pins)[name]
        if isinstance(value, str):
            return value
        per_python = dict(value)
        if python is None or python not in per_python:
            raise UsageError(
                f"pytorch {self.series} pins {name} per Python; python {python} is not one of "
                f"{' '.join(per_python)}"
            )
        return per_python[python]

    def host_pins(self, python: str | None = None) -> dict[str, str]:
        """All pins for one Python: {"numpy": "1.19.*", "mkl": ">=2019", ...}."""
        return {name: self.pin(name, python) for name, _ in self.pins}

    def run_deps_for(self, *, python: str | None, blas: str) -> tuple[str, ...]:
        return tuple(d.spec for d in self.run_deps if d.applies(python=python, blas=blas))


def _pins(raw: dict[str, Any]) -> tuple[tuple[str, str | tuple[tuple[str, str], ...]], ...]:
    out: list[tuple[str, str | tuple[tuple[str, str], ...]]] = []
    for name, value in raw.items():
        if isinstance(value, dict):
            out.append((name, tuple((str(k), str(v)) for k, v in value.items())))
        else:
            out.append((name, str(value)))
    return tuple(out)


@cache
def _pytorch_rows() -> tuple[PytorchInfo, ...]:
    rows: list[PytorchInfo] = []
    for row in _load("pytorch.yaml")["series"]:
        for dep in row["run_deps"]:
            if dep.get("python"):
                try:
                    SpecifierSet(dep["python"])
                except InvalidSpecifier as exc:  # a data error, caught by the table tests
                    raise ValueError(f"pytorch.yaml {row['series']}: bad python specifier") from exc
        rows.append(
            PytorchInfo(
                series=str(row["series"]),
                versions=tuple(str(v) for v in row["versions"]),
                pythons=tuple(str(p) for p in row["pythons"]),
                pins=_pins(row["pins"]),
                build_command=row["build_command"],
                static_cudnn=bool(row["static_cudnn"]),
                static_nccl=bool(row["static_nccl"]),
                extra_env=tuple((str(k), str(v)) for k, v in row["extra_env"].items()),
                mutex=row["mutex"],
                cudas=tuple(str(c) for c in row["cudas"]),
                build_split_cuda=bool(row["build_split_cuda"]),
                run_deps=tuple(RunDep(**d) for d in row["run_deps"]),
            )
        )
    return tuple(rows)


def pytorch_versions() -> tuple[str, ...]:
    """Every known PyTorch release, oldest first."""
    return tuple(v for row in _pytorch_rows() for v in row.versions)


def pytorch_info(version: str) -> PytorchInfo:
    """The series row of one PyTorch release; unknown versions list the valid ones."""
    v = version.strip()
    for row in _pytorch_rows():
        if v in row.versions:
            return row
    shown = version if len(version) <= 40 else version[:37] + "..."  # a 5,000-digit value is not repeated
    raise UsageError(f"unknown pytorch version {shown!r}; valid: {' '.join(pytorch_versions())}")


def upstream_releases_before_tables(cuda: str) -> tuple[str, ...]:
    """Releases upstream built for `cuda` that are older than every series of pytorch.yaml."""
    table = _load("pytorch.yaml").get("upstream_before_tables") or {}
    return tuple(str(v) for v in table.get(cuda, ()))


# ---------------------------------------------------------------- torchvision.yaml


@dataclass(frozen=True)
class TorchvisionInfo:
    """One torchvision release and the PyTorch release it is built against (torchvision.yaml)."""

    version: str  # "0.19.1"
    series: str  # "0.19"
    torch: str  # "2.4.1": the official pair
    webp: bool  # the release decodes WebP through libwebp
    host_pins: tuple[tuple[str, str], ...] = ()  # (package, conda version spec) of its setup.py


@cache
def _torchvision_rows() -> tuple[TorchvisionInfo, ...]:
    rows: list[TorchvisionInfo] = []
    for row in _load("torchvision.yaml")["series"]:
        for version, torch in row["pairs"].items():
            if pytorch_info(str(torch)).series != str(row["torch_series"]):  # a data error
                raise ValueError(
                    f"torchvision.yaml {version}: torch {torch} is not series {row['torch_series']}"
                )
            pins = tuple((str(k), str(v)) for k, v in (row.get("host_pins") or {}).items())
            rows.append(
                TorchvisionInfo(str(version), str(row["series"]), str(torch), bool(row["webp"]), pins)
            )
    return tuple(rows)


def torchvision_versions() -> tuple[str, ...]:
    """Every known torchvision release, oldest first."""
    return tuple(row.version for row in _torchvision_rows())


def torchvision_info(version: str) -> TorchvisionInfo:
    """One torchvision release; an unknown version lists the valid ones."""
    for row in _torchvision_rows():
        if row.version == version.strip():
            return row
    raise UsageError(f"unknown torchvision version {version!r}; valid: {' '.join(torchvision_versions())}")


def torchvision_for_torch(torch: str) -> TorchvisionInfo:
    """The torchvision release paired with the PyTorch release ``torch``; UsageError when none is."""
    for row in _torchvision_rows():
        if row.torch == torch.strip():
            return row
    paired = sorted({r.torch for r in _torchvision_rows()}, key=Version)
    older = [v for v in paired if Version(v) <= Version(torch)]
    nearest = older[-1] if older else paired[0]
    raise UsageError(
        f"no torchvision release pairs with pytorch {torch} (torchvision.yaml pairs {paired[0]} … "
        f"{paired[-1]}); the nearest that does: --version {nearest}"
    )


ENV_READERS = ("wheel-cmake", "wheel-python", "setup", "tool", "doc")


@dataclass(frozen=True)
class EnvEvidence:
    """Who reads one variable build.sh exports (pytorch.yaml build_env), and where that is seen."""

    name: str
    reader: str  # one of ENV_READERS
    source: str
    since: str | None = None  # first series whose wheel carries the wheel-* evidence


@cache
def build_env_evidence() -> dict[str, EnvEvidence]:
    """pytorch.yaml's build_env: every variable the pytorch/libtorch build.sh may export."""
    out = {}
    for name, row in (_load("pytorch.yaml").get("build_env") or {}).items():
        if row.get("reader") not in ENV_READERS or not str(row.get("source", "")).strip():
            raise ValueError(f"pytorch.yaml build_env {name}: needs a reader of {ENV_READERS} and a source")
        since = row.get("since")
        out[str(name)] = EnvEvidence(
            str(name), row["reader"], str(row["source"]), str(since) if since else None
        )
    return out


__all__ = [
    "CPU",
    "ENV_READERS",
    "CudaInfo",
    "EnvEvidence",
    "MagmaInfo",
    "PytorchInfo",
    "RunConstraint",
    "RunDep",
    "build_env_evidence",
    "cuda_info",
    "cuda_versions",
    "link_overflow_max_images",
    "normalize_cuda",
    "pytorch_info",
    "pytorch_versions",
]


def pypi_conda_names() -> dict[str, str]:
    """PyPI distribution (PEP 503 name) -> conda-forge package name, where the two differ."""
    return dict(_load("wheel_packages.yaml")["names"])


def wheel_cuda_libraries() -> dict[str, str | None]:
    """Conda runtime name of an NVIDIA CUDA library wheel -> its -dev package's name, or None where
    conda-forge ships one package (wheel_packages.yaml `cuda_libraries`)."""
    return {name: rule.get("dev") for name, rule in _load("wheel_packages.yaml")["cuda_libraries"].items()}


def wheel_cuda_run_export_pins() -> dict[str, str | None]:
    """Conda runtime name of an NVIDIA CUDA library wheel -> how far the package a build links
    against run-exports it ("x": to the next major), or None (wheel_packages.yaml `cuda_libraries`)."""
    rules = _load("wheel_packages.yaml")["cuda_libraries"]
    return {name: rule.get("max_pin") for name, rule in rules.items()}


def wheel_dev_links() -> dict[str, dict[str, str]]:
    """-devel packages whose unversioned library links a wheel cannot carry (wheel_packages.yaml)."""
    return {name: dict(rule) for name, rule in _load("wheel_packages.yaml")["dev_links"].items()}

"""BuildSpec: the one validated description of what to build.

Everything downstream (render, engines, fix, verify, plan) reads a BuildSpec and nothing
else from the user, so all validation of user input happens while building one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from condapipe.arch import ArchList

CPU = "cpu"


@dataclass(frozen=True)
class Source:
    """Where the upstream source comes from: a git tag (default), a local checkout, or a tarball URL."""

    kind: str  # "git" | "path" | "url"
    url: str | None = None  # git URL or tarball URL
    rev: str | None = None  # git tag/commit, e.g. "v1.8.0"
    path: Path | None = None  # local checkout (--source DIR)
    sha256: str | None = None  # for tarballs


@dataclass(frozen=True)
class CudaVariant:
    """One CUDA axis value of the variant matrix, with its resolved arch list and cuDNN."""

    cuda: str  # "11.0", "12.8", ... or "cpu"
    archs: ArchList | None  # None for cpu
    cudnn: str | None  # e.g. "8.0.5"; None for cpu

    @property
    def is_cpu(self) -> bool:
        return self.cuda == CPU


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
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def cudas(self) -> tuple[str, ...]:
        return tuple(v.cuda for v in self.cuda_variants)

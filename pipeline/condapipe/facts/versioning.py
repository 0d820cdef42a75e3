"""A family's versioning: how its profile's `version:` turns --version (or its absence) into the
version built, and what else follows from that kind of version.

The profile names one kind (`pytorch`, `torchvision`, `magma`, `required`) or a fixed default
version ("1.0.0"); `versioning_of` reads it once, when the registry is read, into one of the
strategies below. Callers ask the strategy what they need (the version, the PyTorch release whose
series rules apply, a companion's version, the table's build number and source) instead of
comparing the kind's name, so a new kind is one class here and a line in `KINDS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from packaging.version import InvalidVersion, Version

from condapipe.errors import UsageError
from condapipe.facts import tables


@dataclass(frozen=True)
class Versioning:
    """A family whose version is --version when given, else the profile's fixed `default`."""

    default: str = ""
    kind: ClassVar[str] = "fixed"
    # The version is a PyTorch release (pytorch.yaml): a JetPack's PyTorch is its default on a
    # board, the series' required build env applies and planning's defaults pick a release.
    torch_release: ClassVar[bool] = False
    # The version is a release built against exactly one PyTorch release (torchvision.yaml).
    built_against_torch: ClassVar[bool] = False

    def resolve(
        self, package: str, given: str | None, cudas: Sequence[str], warnings: list[str]
    ) -> tuple[str, tables.PytorchInfo | None]:
        """The version built and, for a torch-versioned family, the PyTorch series whose rules
        (Pythons, cuDNN, archs, pairs) apply; UsageError when --version is missing or unknown."""
        if given:
            check_version_text(given)
        return given or self.default, None

    def torch_of(self, version: str) -> str:
        """The PyTorch release whose CUDA pairs apply to this version."""
        return version

    def companion_version(self, torch_version: str) -> str:
        """This family's version when it is built beside the PyTorch release `torch_version`."""
        return torch_version

    def describe(self, package: str, version: str, torch: tables.PytorchInfo | None) -> str:
        """How an error about the Pythons names what is built ("pytorch 2.4")."""
        return package if torch is None else f"{package} {torch.series}"

    def table_package(self, cuda: str) -> tables.MagmaInfo | None:
        """The package the CUDA table names for `cuda` (its name, version, build number and
        source), when this family is versioned by the table; else None."""
        return None

    def default_build_number(self, version: str, cudas: Iterable[str]) -> int:
        """The build number when --build-number is not given, for `version` built for `cudas`."""
        return 0


@dataclass(frozen=True)
class Required(Versioning):
    """--version must be given, any valid version text (`version: required`)."""

    kind: ClassVar[str] = "required"

    def resolve(
        self, package: str, given: str | None, cudas: Sequence[str], warnings: list[str]
    ) -> tuple[str, tables.PytorchInfo | None]:
        if not given:
            raise UsageError(f"{package} needs --version")
        check_version_text(given)
        return given, None


@dataclass(frozen=True)
class PytorchRelease(Versioning):
    """A known PyTorch release from pytorch.yaml, required (`version: pytorch`)."""

    kind: ClassVar[str] = "pytorch"
    torch_release: ClassVar[bool] = True

    def resolve(
        self, package: str, given: str | None, cudas: Sequence[str], warnings: list[str]
    ) -> tuple[str, tables.PytorchInfo | None]:
        if not given:
            raise UsageError(f"{package} needs --version; valid: {' '.join(tables.pytorch_versions())}")
        return given, tables.pytorch_info(given)


@dataclass(frozen=True)
class TorchvisionRelease(Versioning):
    """A torchvision release of torchvision.yaml, required (`version: torchvision`); the PyTorch
    release it pairs with gives the series rules."""

    kind: ClassVar[str] = "torchvision"
    built_against_torch: ClassVar[bool] = True

    def resolve(
        self, package: str, given: str | None, cudas: Sequence[str], warnings: list[str]
    ) -> tuple[str, tables.PytorchInfo | None]:
        # A torchvision release is built against exactly one PyTorch release (torchvision.yaml):
        # that release's series decides the Pythons, cuDNN and arch defaults, as for pytorch.
        if not given:
            raise UsageError(f"{package} needs --version; valid: {' '.join(tables.torchvision_versions())}")
        return given, tables.pytorch_info(self.torch_of(given))

    def torch_of(self, version: str) -> str:
        return tables.torchvision_info(version).torch

    def companion_version(self, torch_version: str) -> str:
        return tables.torchvision_for_torch(torch_version).version

    def describe(self, package: str, version: str, torch: tables.PytorchInfo | None) -> str:
        return f"{package} {version} (built against pytorch {self.torch_of(version)})"


@dataclass(frozen=True)
class CudaTable(Versioning):
    """The magma version of the CUDA table, --version overriding (`version: magma`); a family
    versioned so builds the table's package for each CUDA (magma-cuda118 2.6.1, build number 1)."""

    kind: ClassVar[str] = "magma"

    def resolve(
        self, package: str, given: str | None, cudas: Sequence[str], warnings: list[str]
    ) -> tuple[str, tables.PytorchInfo | None]:
        per_cuda = {c: tables.cuda_info(c).magma.version for c in cudas}
        distinct = sorted(set(per_cuda.values()), key=Version)
        if given:
            check_version_text(given)
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

    def table_package(self, cuda: str) -> tables.MagmaInfo | None:
        return None if cuda == tables.CPU else tables.cuda_info(cuda).magma

    def default_build_number(self, version: str, cudas: Iterable[str]) -> int:
        # The table's build number for the package it names (magma-cuda118 2.6.1 is build 1, the
        # build pytorch's upstream builds linked), when every CUDA's table agrees on it.
        tabled = (self.table_package(c) for c in cudas)
        numbers = {m.build_number for m in tabled if m is not None and m.version == version}
        return numbers.pop() if len(numbers) == 1 else 0


KINDS: dict[str, Versioning] = {
    v.kind: v for v in (Required(), PytorchRelease(), TorchvisionRelease(), CudaTable())
}


def versioning_of(text: str, where: str) -> Versioning:
    """The profile's `version:`: a kind of KINDS, or a fixed default version; one line if neither."""
    if text in KINDS:
        return KINDS[text]
    try:
        check_version_text(text)
    except UsageError:
        raise UsageError(
            f"{where}: {text!r} is neither a version kind ({' '.join(KINDS)}) nor a version like 1.0.0"
        ) from None
    return Versioning(default=text)


MAX_VERSION_LENGTH = 64  # a conda file name is at most 211 characters (CEP 26); real versions are short


def check_version_text(text: str) -> None:
    if len(text) > MAX_VERSION_LENGTH:
        raise UsageError(
            f"invalid version ({len(text)} characters, at most {MAX_VERSION_LENGTH}); write it like 1.2.3"
        )
    try:
        Version(text)
    except (InvalidVersion, ValueError):  # ValueError: a number part too long for int()
        raise UsageError(f"invalid version {text!r}; write it like 1.2.3") from None

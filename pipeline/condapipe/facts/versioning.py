"""A family's version: how the profile's `version:` turns --version (or its absence) into the
version built, and the PyTorch release whose series rules apply."""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.families import FamilyRules


def resolve_version(
    package: str, rules: FamilyRules, settings: dict[str, Any], cudas: list[str], warnings: list[str]
) -> tuple[str, tables.PytorchInfo | None]:
    given = settings.get("version")
    given = str(given).strip() if given is not None else None
    if rules.version == "pytorch":
        if not given:
            raise UsageError(f"{package} needs --version; valid: {' '.join(tables.pytorch_versions())}")
        return given, tables.pytorch_info(given)
    if rules.version == "torchvision":
        # A torchvision release is built against exactly one PyTorch release (torchvision.yaml):
        # that release's series decides the Pythons, cuDNN and arch defaults, as for pytorch.
        if not given:
            raise UsageError(f"{package} needs --version; valid: {' '.join(tables.torchvision_versions())}")
        return given, tables.pytorch_info(tables.torchvision_info(given).torch)
    if rules.version == "magma":
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
    if rules.version == "required":
        if not given:
            raise UsageError(f"{package} needs --version")
        check_version_text(given)
        return given, None
    if given:
        check_version_text(given)
    return given or rules.version, None


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

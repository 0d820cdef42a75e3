"""What a package promises: the CUDA and arch list it records, else its family's default list.

The promise is recorded in the package itself: the recipe's `extra` section (which both
conda-build and rattler-build copy into info/about.json) carries
``condapipe: {cuda: "12.8", cuda_archs: "8.0;9.0+PTX"}``; `promise_record` spells it for render
and `recorded_promise` reads it back for verify. A package without a record promises its family's
default list for the user's --cuda (`promised_archs`), the same list the spec stage gives a build
without --arch (`default_archs`). A fact, not a setting: verify reads it without loading the
settings cascade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.arch import ArchList, magma_default_archs, parse_explicit_arch_list, torch_default_archs
from condapipe.facts.families import (
    FamilyRules,
    default_rules,
    family_of_package,
    family_rules,
    known_packages,
)

CPU = tables.CPU
RECORD_SECTION = "condapipe"  # about.json extra.<this>
RECORD_CUDA = "cuda"
RECORD_ARCHS = "cuda_archs"
_NOTHING_PROMISED = ("", "none", CPU)  # recorded values of CPU variants in a mixed matrix


def default_archs(rules: FamilyRules, cuda: str, package: str) -> ArchList:
    if rules.arch_default == "magma":
        return magma_default_archs(cuda)
    if rules.arch_default == "torch":
        return torch_default_archs(cuda)
    raise UsageError(f"{package} needs --arch for CUDA builds")


def promised_archs(family: str | None, cuda: str) -> ArchList:
    """The arch list a package of ``family`` built for ``cuda`` without --arch promises.

    magma's list for magma, pytorch's for pytorch; a package of no known family (``None`` or
    a name outside the registry) gets the default rules' list.
    """
    rules = _rules_for(family)
    archs = default_archs(rules, cuda, family or "this package")
    return archs if rules.ptx else archs.sass_only()


def _rules_for(family: str | None) -> FamilyRules:
    return family_rules(family) if family in known_packages() else default_rules()


# ------------------------------------------------------------------ the promise in the package


def promise_record(cuda: str, archs: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The recipe `extra` entry a package records its promise in (values may be variant refs)."""
    return RECORD_SECTION, ((RECORD_CUDA, cuda), (RECORD_ARCHS, archs))


def recorded_promise(about: dict[str, Any]) -> tuple[str | None, ArchList | None]:
    """The CUDA and arch list a package's info/about.json records, (None, None) if none.

    A CPU variant of a mixed matrix records "none"; that promises nothing. An arch list that
    does not parse is a UsageError naming the recorded text.
    """
    extra = about.get("extra")
    record = extra.get(RECORD_SECTION) if isinstance(extra, dict) else None
    if not isinstance(record, dict):
        return None, None
    cuda = str(record.get(RECORD_CUDA) or "").strip() or None
    text = str(record.get(RECORD_ARCHS) or "").strip()
    if cuda == CPU or text.lower() in _NOTHING_PROMISED:
        return cuda, None
    try:
        return cuda, parse_explicit_arch_list(text)
    except UsageError as exc:
        raise UsageError(f"info/about.json records an unreadable arch list {text!r}: {exc}") from None


@dataclass(frozen=True)
class Promise:
    """The CUDA archs a package must hold, where that list came from, and what contradicts it."""

    archs: ArchList | None
    source: str | None = None  # e.g. "recorded in the package", "CUDA 12.8 default of magma"
    problem: str | None = None  # a defect of the package (unreadable record, another CUDA)


def package_promise(name: str, about: dict[str, Any], cuda: str | None = None) -> Promise:
    """What the conda package ``name`` promises, given its info/about.json and the user's --cuda.

    The package's own record wins; without one, ``cuda`` supplies the default list of the
    package's family (magma's for magma-cudaXY, pytorch's for pytorch). A record of another CUDA
    than ``cuda`` is a problem. An unknown ``cuda`` is the user's mistake (UsageError).
    """
    wanted = tables.normalize_cuda(cuda) if cuda else None
    try:
        recorded_cuda, recorded = recorded_promise(about)
    except UsageError as exc:
        return Promise(archs=None, problem=str(exc))
    if recorded is not None or recorded_cuda is not None:
        problem = None
        if wanted is not None and recorded_cuda is not None and _same_cuda(recorded_cuda) != wanted:
            problem = f"the package records CUDA {recorded_cuda}, not {wanted}"
        source = f"recorded in the package (CUDA {recorded_cuda})" if recorded is not None else None
        return Promise(archs=recorded, source=source, problem=problem)
    if wanted is None or wanted == CPU:
        return Promise(archs=None)
    family = family_of_package(name)
    return Promise(
        archs=promised_archs(family, wanted),
        source=f"CUDA {wanted} default ({_rules_for(family).arch_default}'s list)",
    )


def _same_cuda(text: str) -> str:
    """A recorded CUDA in the table's spelling (an unknown one stays as written)."""
    try:
        return tables.normalize_cuda(text)
    except UsageError:
        return text

"""The family registry: which package families exist and what spec validation requires of each.

One registry for every stage: a family exists when data/spec_families.yaml lists it or recipes/
has a folder for it. The render stage looks its module up from the name
(condapipe.render.families.<name>); nothing below render asks render which families exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources
from typing import Any

from ruamel.yaml import YAML

from condapipe.errors import UsageError

# recipes/ folders that hold shared templates, not a family
_NOT_FAMILIES = ("common",)


@dataclass(frozen=True)
class FamilyRules:
    """One entry of data/spec_families.yaml (merged over its `default`)."""

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
    package_names: tuple[str, ...]  # globs of the conda package names the family builds


@cache
def _family_table() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("spec_families.yaml").read_text()
    return YAML(typ="safe").load(text)


def _rules(name: str | None, raw: dict[str, Any]) -> FamilyRules:
    names = raw.get("package_names") or ([name] if name else [])
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
        package_names=tuple(str(n) for n in names),
    )


def known_packages() -> tuple[str, ...]:
    """Every family, as users type it: listed in spec_families.yaml or a folder under recipes/."""
    names = set(_family_table()["families"])
    recipes = resources.files("condapipe.recipes")
    names.update(
        p.name
        for p in recipes.iterdir()
        if p.is_dir() and not p.name.startswith(("_", ".")) and p.name not in _NOT_FAMILIES
    )
    return tuple(sorted(names))


def family_rules(package: str) -> FamilyRules:
    """Validation rules of ``package``; UsageError listing the known packages if unknown."""
    if package not in known_packages():
        raise UsageError(f"unknown package {package!r}; choose one of {', '.join(known_packages())}")
    table = _family_table()
    return _rules(package, {**table["default"], **table["families"].get(package, {})})


def default_rules() -> FamilyRules:
    """The rules of a package that is no known family (e.g. a verified package of a recipe dir)."""
    return _rules(None, _family_table()["default"])


def family_of_package(name: str) -> str | None:
    """The family that builds the conda package ``name`` ("magma-cuda118" -> "magma"), or None."""
    for family in known_packages():
        if any(fnmatchcase(name, pattern) for pattern in family_rules(family).package_names):
            return family
    return None

"""The run requirement that building against a pinned host package implies (its run_exports).

condapipe's recipes build with the machine's compilers and name their run requirements
themselves; a package compiled against numpy 2.0 or MKL 2023.1 needs a numpy or MKL at run time
that keeps that ABI. data/run_exports.yaml has the ranges conda-forge's packages export; this turns
a recipe's host pin ("2.0.*", "2023.1", ">=2.3") into that run requirement.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML


@cache
def _table() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("run_exports.yaml").read_text(encoding="utf-8")
    return dict(YAML(typ="safe").load(text))


def exported(name: str) -> bool:
    """Whether `name` has a run-export rule."""
    return name in _table()


def _lowest(pin: str) -> Version | None:
    """The lowest version a host pin admits: "2.0.*" -> 2.0, ">=2019" -> 2019, "1.21.5" -> 1.21.5."""
    match = re.search(r"\d+(?:\.\d+)*", pin)
    if not match or "<" in pin.split(",")[0]:
        return None
    try:
        return Version(match.group(0))
    except InvalidVersion:
        return None


def run_spec(name: str, host_pin: str) -> str:
    """The run requirement of a package built against `name` at `host_pin` (unpinned: any)."""
    rule = _table()[name]
    lowest = _lowest(host_pin) if host_pin else None
    if lowest is None:
        return name
    floor = str(lowest)
    for row in rule.get("floors") or ():
        if lowest in SpecifierSet(str(row["host"])):
            floor = str(row["floor"])
            break
    # An open pin (">=2019") leaves the version built against unknown at render time: no upper bound.
    if rule.get("upper") == "major" and not host_pin.lstrip().startswith(">"):
        return f"{name} >={floor},<{lowest.major + 1}.0a0"
    return f"{name} >={floor}"

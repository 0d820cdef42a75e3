"""The order a batch of packages is published in: dependencies first, then by rank.

Solvers may see a channel between two uploads, so a package must never be published before
something of the same batch that it needs. The ranks that belong to no family live in
data/upload_order.yaml, each family's own in the `upload_rank:` section of its profile
(condapipe.facts.families).
"""

from __future__ import annotations

import fnmatch
import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ruamel.yaml import YAML

from condapipe.facts.families import profiles
from condapipe.package.io import PackageInfo


@dataclass(frozen=True)
class RankRule:
    pattern: str
    rank: int


@lru_cache(maxsize=1)
def _generic() -> tuple[tuple[RankRule, ...], int]:
    text = resources.files("condapipe.data").joinpath("upload_order.yaml").read_text(encoding="utf-8")
    data = YAML(typ="safe").load(text)
    rules = tuple(RankRule(str(r["pattern"]), int(r["rank"])) for r in data["ranks"])
    return rules, int(data["default_rank"])


def rank_rules() -> tuple[RankRule, ...]:
    """Every rank rule, lowest rank first: data/upload_order.yaml's, then each family's (registry
    order) on a tie. The first match is the lowest matching rank."""
    generic, _ = _generic()
    families = (RankRule(p, r) for profile in profiles() for p, r in profile.upload_ranks)
    return tuple(sorted((*generic, *families), key=lambda rule: rule.rank))


def rank(name: str) -> int:
    """The rank of a package name from the rank rules (lower goes first)."""
    _, default = _generic()
    return next((r.rank for r in rank_rules() if fnmatch.fnmatchcase(name, r.pattern)), default)


_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def _dep_name(spec: str) -> str:
    """The package name of a match spec such as "magma-cuda121 >=2.6" or "numpy>=1.20"."""
    match = _NAME.match(spec.strip())
    return match.group(0) if match else ""


def upload_order(packages: Sequence[PackageInfo]) -> list[PackageInfo]:
    """Topological order over in-batch dependencies, ties broken by (rank, name, version, file)."""
    by_name: dict[str, list[int]] = {}
    for i, pkg in enumerate(packages):
        by_name.setdefault(pkg.name, []).append(i)
    needs: list[set[int]] = []
    for i, pkg in enumerate(packages):
        deps = {j for spec in pkg.depends for j in by_name.get(_dep_name(spec), []) if j != i}
        needs.append(deps)
    dependents: dict[int, set[int]] = {i: set() for i in range(len(packages))}
    for i, deps in enumerate(needs):
        for j in deps:
            dependents[j].add(i)

    def key(i: int) -> tuple:
        p = packages[i]
        return (rank(p.name), p.name, p.version, p.build, str(p.path), i)

    ready = [key(i) for i, deps in enumerate(needs) if not deps]
    heapq.heapify(ready)
    waiting = [set(d) for d in needs]
    out: list[int] = []
    while ready:
        i = heapq.heappop(ready)[-1]
        out.append(i)
        for k in sorted(dependents[i]):
            waiting[k].discard(i)
            if not waiting[k] and k not in out:
                heapq.heappush(ready, key(k))
    # A dependency cycle cannot be ordered: append the rest by rank rather than drop them.
    rest = sorted(key(i) for i in range(len(packages)) if i not in set(out))
    out.extend(k[-1] for k in rest)
    return [packages[i] for i in out]

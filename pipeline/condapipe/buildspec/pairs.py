"""Which (PyTorch release, CUDA) pairs condapipe offers, and what shows that each one compiles.

Upstream built each release for a few CUDAs (pytorch.yaml `cudas`): those pairs compile. Any
other pair is offered only when pytorch.yaml's `compiles_beyond_upstream` says why it compiles
(evidence: what was compiled here, or the build that did it; or the patch-catalog entries that
make it compile), or when NVIDIA built that release for a JetPack with that CUDA (jetson.yaml).
A pair that `cannot_compile` names, and every pair nothing vouches for, is refused before
anything is written, with the reason and the nearest pair that works. The facts are data; this
module only looks them up, so that a pair is never "built anyway" on hope.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from condapipe.facts import tables

UPSTREAM = "upstream"  # upstream built the release for the CUDA (or a CPU build)
EVIDENCE = "evidence"  # not built upstream; compiles as rendered (cited or proven)
PATCHED = "patched"  # not built upstream; compiles with the named catalog patches
REFUSED = "refused"


@dataclass(frozen=True)
class PairVerdict:
    """Whether one (release, CUDA) pair is offered, and the one line that says why."""

    version: str
    cuda: str
    kind: str  # UPSTREAM, EVIDENCE, PATCHED or REFUSED
    why: str = ""  # the evidence, or the reason for a refusal
    patches: tuple[str, ...] = ()  # catalog ids that make it compile (PATCHED)
    nearest: tuple[str, ...] = ()  # "--version V --cuda C" pairs that work (REFUSED)
    unproven: bool = False  # REFUSED because nothing shows it compiles (not a known break)

    @property
    def offered(self) -> bool:
        return self.kind != REFUSED

    def line(self) -> str:
        """The user's line: the refusal, or how a pair upstream did not build compiles ("" upstream)."""
        if self.kind == UPSTREAM:
            return ""
        if self.kind == REFUSED:
            hint = f"; nearest that compiles: {' or '.join(self.nearest)}" if self.nearest else ""
            verdict = "is not offered with" if self.unproven else "cannot be compiled with"
            return f"pytorch {self.version} {verdict} CUDA {self.cuda}: {self.why}{hint}"
        built = " ".join(tables.pytorch_info(self.version).cudas)
        head = f"pytorch {self.version} was not built upstream for CUDA {self.cuda} (upstream: {built}); "
        if self.patches:
            return f"{head}it compiles with the catalog's patches {', '.join(self.patches)}: {self.why}"
        return f"{head}it compiles as rendered: {self.why}"


def _spans(rule: dict[str, Any], version: str, cuda: str) -> bool:
    return Version(version) in SpecifierSet(rule["pytorch"]) and Version(cuda) in SpecifierSet(rule["cuda"])


def _words(text: str) -> str:
    return " ".join(str(text).split())


@cache
def pair_verdict(version: str, cuda: str) -> PairVerdict:
    """The verdict on building PyTorch `version` (a known release) with `cuda`."""
    info = tables.pytorch_info(version)
    if cuda == tables.CPU:
        return PairVerdict(version, cuda, UPSTREAM)
    data = tables._load("pytorch.yaml")
    # several may match (2.x and 1.x with CUDA 13): the last, narrower entry says why
    broken = [rule for rule in data.get("cannot_compile") or () if _spans(rule, version, cuda)]
    if broken:
        why = _words(broken[-1]["reason"])
        return PairVerdict(version, cuda, REFUSED, why, nearest=_nearest(version, cuda))
    if cuda in info.cudas:
        return PairVerdict(version, cuda, UPSTREAM)
    for rule in data.get("compiles_beyond_upstream") or ():
        if not _spans(rule, version, cuda):
            continue
        # the catalog selects these for every pair of the entry (tests/buildspec/test_pairs.py checks it;
        # reading the catalog here would make the spec stage import render)
        wanted = tuple(str(p) for p in rule.get("patches") or ())
        return PairVerdict(version, cuda, PATCHED if wanted else EVIDENCE, _words(rule["evidence"]), wanted)
    jetpack = _jetpack_build(version, cuda)
    if jetpack:
        return PairVerdict(version, cuda, EVIDENCE, jetpack)
    why = (
        f"upstream built it for CUDA {' '.join(info.cudas)} only, and nothing shows that it compiles "
        f"with {cuda} (no evidence or catalog patch for the pair in pytorch.yaml compiles_beyond_upstream)"
    )
    return PairVerdict(version, cuda, REFUSED, why, nearest=_nearest(version, cuda), unproven=True)


def _jetpack_build(version: str, cuda: str) -> str:
    """'NVIDIA built ...' when NVIDIA published `version` for a JetPack whose CUDA is `cuda`."""
    for name, jp in tables._load("jetson.yaml")["jetpacks"].items():
        if str(jp["pytorch"]) == version and str(jp["cuda"]) == cuda:
            return f"NVIDIA built it for JetPack {name} (CUDA {cuda}; jetson.yaml)"
    return ""


def _nearest(version: str, cuda: str) -> tuple[str, ...]:
    """The same release on the nearest CUDA upstream built it for, and the nearest release upstream
    built for this CUDA (else the nearest one the tables offer with it)."""
    order = tables.cuda_versions()
    versions = tables.pytorch_versions()

    def cuda_key(other: str) -> tuple[int, int, int]:
        # same major first, then steps in cuda.yaml; ties go to the newer CUDA
        major = int(other.split(".")[0] != cuda.split(".")[0])
        return (major, abs(order.index(other) - order.index(cuda)), -order.index(other))

    out: list[str] = []
    same = [c for c in tables.pytorch_info(version).cudas if c in order]
    if same:
        out.append(f"--version {version} --cuda {min(same, key=cuda_key)}")
    here = versions.index(version)
    built = [v for v in versions if cuda in tables.pytorch_info(v).cudas and v != version]
    if not built:
        built = [v for v in versions if v != version and _offered_beyond_upstream(v, cuda)]
    if built:
        best = min(built, key=lambda v: (abs(versions.index(v) - here), -versions.index(v)))
        out.append(f"--version {best} --cuda {cuda}")
    return tuple(out)


def _offered_beyond_upstream(version: str, cuda: str) -> bool:
    data = tables._load("pytorch.yaml")
    if any(_spans(rule, version, cuda) for rule in data.get("cannot_compile") or ()):
        return False
    rules = data.get("compiles_beyond_upstream") or ()
    return any(_spans(rule, version, cuda) for rule in rules) or bool(_jetpack_build(version, cuda))


def offered(version: str, cuda: str) -> bool:
    """Whether the pair is offered (upstream built it, or something shows it compiles)."""
    return pair_verdict(version, cuda).offered


__all__ = ["EVIDENCE", "PATCHED", "REFUSED", "UPSTREAM", "PairVerdict", "offered", "pair_verdict"]

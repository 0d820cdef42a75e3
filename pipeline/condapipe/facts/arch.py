"""GPU architecture lists: one parser for every spelling users and upstream scripts use.

PyTorch wants ``TORCH_CUDA_ARCH_LIST`` ("8.0;8.6+PTX"), magma wants nvcc ``-gencode`` flags and the
verifier compares the SASS/PTX found in fatbins; all three are views of one ``ArchList``, so they
cannot drift apart. Which archs a CUDA version can compile, and which it builds by default, is
data (``condapipe.facts.tables`` reads cuda.yaml; data/arch_families.yaml names the capabilities).

Imports go one way: this module uses ``tables`` (CUDA rows) and ``native`` (nvidia-smi's raw
answer); neither imports it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ruamel.yaml import YAML

from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.facts import tables
from condapipe.facts.native import query_compute_caps

SUFFIXES = ("", "a", "f")

# "8.6", "9.0a", "12.0+PTX", "sm_90a", "sm_120"
_DOTTED = re.compile(r"^(?P<major>\d{1,2})\.(?P<minor>\d)(?P<suffix>[af]?)(?P<ptx>\+ptx)?$", re.IGNORECASE)
_SM = re.compile(r"^sm_?(?P<num>\d{2,3})(?P<suffix>[af]?)(?P<ptx>\+ptx)?$", re.IGNORECASE)
_SEPARATORS = re.compile(r"[;,\s]+")


@dataclass(frozen=True, order=True)
class Arch:
    """One compute capability, optionally arch-specific ("a") or family-specific ("f"), optionally + PTX."""

    major: int
    minor: int
    suffix: str = ""
    ptx: bool = False

    def __post_init__(self) -> None:
        if self.suffix not in SUFFIXES:
            raise UsageError(f"arch suffix must be one of 'a', 'f' or none, not {self.suffix!r}")
        if not (0 <= self.minor <= 9) or self.major < 1:
            raise UsageError(f"invalid compute capability {self.major}.{self.minor}")

    @property
    def number(self) -> int:
        return self.major * 10 + self.minor

    @property
    def capability(self) -> str:
        """The compute capability without the PTX marker."""
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def sm(self) -> str:
        return f"sm_{self.number}{self.suffix}"

    @property
    def compute(self) -> str:
        return f"compute_{self.number}{self.suffix}"

    @property
    def torch_name(self) -> str:
        return self.capability + ("+PTX" if self.ptx else "")

    def without_ptx(self) -> Arch:
        return Arch(self.major, self.minor, self.suffix, False)


@dataclass(frozen=True)
class ArchList:
    """A sorted, duplicate-free set of archs; renders to every format the pipeline needs."""

    archs: tuple[Arch, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "archs", _normalise(self.archs))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.archs)

    def __len__(self) -> int:
        return len(self.archs)

    def torch_arch_list(self) -> str:
        """TORCH_CUDA_ARCH_LIST syntax: "8.0;8.6+PTX"."""
        return ";".join(a.torch_name for a in self.archs)

    def gencode_flags(self) -> tuple[str, ...]:
        """nvcc flags: one SASS image per arch, plus a PTX image for each +PTX arch."""
        flags: list[str] = []
        for a in self.archs:
            flags.append(f"-gencode arch={a.compute},code={a.sm}")
            if a.ptx:
                flags.append(f"-gencode arch={a.compute},code={a.compute}")
        return tuple(flags)

    def sass(self) -> frozenset[str]:
        return frozenset(a.sm for a in self.archs)

    def ptx(self) -> frozenset[str]:
        return frozenset(a.compute for a in self.archs if a.ptx)

    @property
    def images(self) -> int:
        """Number of code images nvcc embeds per kernel (SASS + PTX): what drives binary size."""
        return len(self.archs) + sum(1 for a in self.archs if a.ptx)

    def sass_only(self) -> ArchList:
        """The same archs without PTX (magma ships SASS only)."""
        return ArchList(tuple(a.without_ptx() for a in self.archs))

    def to_dict(self) -> dict[str, object]:
        return {
            "torch_arch_list": self.torch_arch_list(),
            "sass": sorted(self.sass()),
            "ptx": sorted(self.ptx()),
        }


def _normalise(archs: tuple[Arch, ...]) -> tuple[Arch, ...]:
    """Merge duplicates ("8.6" and "8.6+PTX" become "8.6+PTX") and sort by capability."""
    merged: dict[tuple[int, int, str], bool] = {}
    for a in archs:
        key = (a.major, a.minor, a.suffix)
        merged[key] = merged.get(key, False) or a.ptx
    return tuple(Arch(major, minor, suffix, ptx) for (major, minor, suffix), ptx in sorted(merged.items()))


@cache
def _data() -> dict:
    text = resources.files("condapipe.data").joinpath("arch_families.yaml").read_text()
    return YAML(typ="safe").load(text)


@cache
def families() -> dict[str, tuple[Arch, ...]]:
    """Family name (lower case, aliases included) -> its archs, from data/arch_families.yaml."""
    out: dict[str, tuple[Arch, ...]] = {}
    for name, entry in _data()["families"].items():
        archs = tuple(parse_token(str(c)) for c in entry["archs"])
        for alias in (name, *entry.get("aliases", [])):
            out[str(alias).lower()] = archs
    return out


@cache
def known_capabilities() -> frozenset[tuple[int, int]]:
    """Every (major, minor) NVIDIA has shipped (data/arch_families.yaml `known`)."""
    return frozenset(_capability(str(c)) for c in _data()["known"])


def _capability(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def parse_token(token: str) -> Arch:
    """Parse one arch spelling ("8.6+PTX", "9.0a", "sm_90", "sm_120a") into an Arch."""
    m = _DOTTED.match(token)
    if m:
        return Arch(int(m["major"]), int(m["minor"]), m["suffix"].lower(), bool(m["ptx"]))
    m = _SM.match(token)
    if m:
        num = int(m["num"])
        return Arch(num // 10, num % 10, m["suffix"].lower(), bool(m["ptx"]))
    raise UsageError(
        f"cannot parse arch {token!r}: use pytorch syntax (8.6, 8.6+PTX, 9.0a), sm_90, "
        f"a family ({', '.join(_data()['families'])}) or native"
    )


def check_known(arch: Arch) -> None:
    """Reject capabilities that no NVIDIA GPU has, and suffixes on archs too old to have them."""
    if (arch.major, arch.minor) not in known_capabilities():
        known = " ".join(f"{a}.{b}" for a, b in sorted(known_capabilities()))
        raise UsageError(f"unknown compute capability {arch.major}.{arch.minor}; known: {known}")
    if arch.suffix:
        oldest = _capability(str(_data()["suffixes"][arch.suffix]))
        if (arch.major, arch.minor) < oldest:
            raise UsageError(
                f"arch {arch.capability} does not exist: '{arch.suffix}' variants start at "
                f"{oldest[0]}.{oldest[1]}"
            )


def cuda_accepts(cuda: str, arch: Arch) -> bool:
    """Whether the nvcc of CUDA ``cuda`` can compile ``arch`` (PTX included)."""
    info = tables.cuda_info(cuda)
    cap = (arch.major, arch.minor)
    if cap not in known_capabilities() or arch.capability.rstrip("af") in info.except_archs:
        return False
    if not (_capability(info.min_arch) <= cap <= _capability(info.max_arch)):
        return False
    if arch.suffix:
        return arch.capability[:-1] in dict(info.suffixed).get(arch.suffix, ())
    return True


def accepted_archs(cuda: str) -> tuple[Arch, ...]:
    """Every arch the nvcc of ``cuda`` compiles, suffixed variants included, oldest first."""
    info = tables.cuda_info(cuda)
    plain = [Arch(a, b) for a, b in sorted(known_capabilities()) if cuda_accepts(cuda, Arch(a, b))]
    extra = [Arch(*_capability(c), suffix) for suffix, caps in info.suffixed for c in caps]
    return tuple(sorted(plain + extra))


def torch_default_archs(cuda: str) -> ArchList:
    """The TORCH_CUDA_ARCH_LIST pytorch's own builds used for ``cuda`` (cuda.yaml torch_arch_list)."""
    info = tables.cuda_info(cuda)
    return parse_arch_list(info.torch_arch_list, cuda=info.version)


def magma_default_archs(cuda: str) -> ArchList:
    """magma's SASS-only -gencode list for ``cuda`` (cuda.yaml magma_archs) as an ArchList."""
    return ArchList(tuple(Arch(n // 10, n % 10) for n in tables.cuda_info(cuda).magma_archs))


def _native_archs() -> list[Arch]:
    """The local GPUs' archs (duplicates removed by ArchList later)."""
    archs = []
    for cap in query_compute_caps():
        try:
            archs.append(parse_token(cap))
        except UsageError:
            raise EnvironmentProblem(
                f"--arch native: nvidia-smi reported an unreadable compute capability {cap!r}",
                "update the NVIDIA driver (compute_cap needs driver >= 510), or name the archs",
            ) from None
    return archs


def _expand(text: str) -> tuple[list[Arch], list[list[Arch]]]:
    """Split the text into plain archs and family groups (families are filtered by CUDA later)."""
    plain: list[Arch] = []
    groups: list[list[Arch]] = []
    tokens = [t for t in _SEPARATORS.split(text.strip()) if t]
    if not tokens:
        raise UsageError("empty arch list: give archs like '8.0;8.6+PTX', a family name or native")
    fams = families()
    for token in tokens:
        low = token.lower()
        ptx = low.endswith("+ptx")
        base = low[:-4] if ptx else low
        if base in fams:
            archs = list(fams[base])
            if ptx:  # "Hopper+PTX": PTX for the newest member only, like upstream lists
                archs[-1] = Arch(archs[-1].major, archs[-1].minor, archs[-1].suffix, True)
            groups.append(archs)
        elif base == "native":
            plain.extend(_native_archs())
        else:
            plain.append(parse_token(token))
    return plain, groups


def parse_arch_list(text: str, *, cuda: str | None = None) -> ArchList:
    """Parse a user arch list; with ``cuda``, reject archs that this CUDA's nvcc cannot compile.

    Family names expand to the members the CUDA can compile (an error if none can); explicitly
    named archs must all be compilable, otherwise the error lists what the CUDA accepts.
    """
    plain, groups = _expand(text)
    for a in plain:
        check_known(a)
    if cuda is None:
        return _checked(ArchList(tuple(plain) + tuple(a for g in groups for a in g)))
    info = tables.cuda_info(cuda)
    bad = [a for a in plain if not cuda_accepts(info.version, a)]
    if bad:
        names = ", ".join(a.capability for a in bad)
        raise UsageError(
            f"CUDA {info.version} cannot compile arch {names}; it accepts: "
            f"{' '.join(a.capability for a in accepted_archs(info.version))}"
        )
    chosen = list(plain)
    for group in groups:
        ok = [a for a in group if cuda_accepts(info.version, a)]
        if not ok:
            names = "/".join(a.capability for a in group)
            raise UsageError(
                f"CUDA {info.version} cannot compile any arch of that family ({names}); it accepts: "
                f"{' '.join(a.capability for a in accepted_archs(info.version))}"
            )
        if group[-1].ptx and not ok[-1].ptx:
            ok[-1] = Arch(ok[-1].major, ok[-1].minor, ok[-1].suffix, True)
        chosen.extend(ok)
    return _checked(ArchList(tuple(chosen)))


def parse_explicit_arch_list(text: str) -> ArchList:
    """Parse a list of explicit archs only, as ArchList.torch_arch_list() writes it.

    For lists read from packages: no family names and no ``native`` (a package must never make
    the verifier ask this machine's GPUs what it promised).
    """
    tokens = [t for t in _SEPARATORS.split(text.strip()) if t]
    if not tokens:
        raise UsageError("empty arch list")
    archs = [parse_token(t) for t in tokens]
    for a in archs:
        check_known(a)
    return _checked(ArchList(tuple(archs)))


def _checked(archs: ArchList) -> ArchList:
    """Reject "10.0" next to "10.0f": both emit the same sm_100 SASS and nvcc refuses the pair."""
    caps = {(a.major, a.minor, a.suffix) for a in archs}
    clash = [f"{m}.{n} and {m}.{n}f" for m, n, s in sorted(caps) if s == "f" and (m, n, "") in caps]
    if clash:
        raise UsageError(f"{', '.join(clash)} produce the same SASS (nvcc refuses both); keep one")
    return archs

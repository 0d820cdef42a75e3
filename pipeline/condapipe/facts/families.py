"""The family registry and profiles: which package families exist, and all that is known of each.

A family is one line of recipes/families.yaml (its profile folder under recipes/ and the render
builder it uses) plus that folder's family.yaml, its profile: what spec validation requires
(`spec:`), its `condapipe fix` rpath rules (`rpath:`), the families a plan builds before it and on
which platforms (`prerequisites:`), its upload ranks (`upload_rank:`), what doctor checks a
machine against and where its measured build costs are (`doctor:`), the libraries its packages
provide to packages that depend on them (`linkage:`), the Jetson boards it takes
(`jetson_boards:`), the patch catalog entries it applies (`patches:`) and the facts its render
builder reads (the rest of the file). Adding a family touches its folder and that one line; every
stage reads families here, and nothing below render asks render which families exist. A profile
that leaves out a section or a key is refused when the registry is read: no family falls back
silently to another's figures.

The profiles come from the installed condapipe.recipes, or from the folder given to
`recipes_root(...)` (a folder laid out like recipes/: a family under development, a test's
throwaway family).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ruamel.yaml import YAML

from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.versioning import Versioning, versioning_of

REGISTRY_FILE = "families.yaml"
PROFILE_FILE = "family.yaml"
# Every profile states each of these (an empty one as {} or []): nothing falls back silently.
SECTIONS = (
    "spec",
    "rpath",
    "prerequisites",
    "upload_rank",
    "doctor",
    "linkage",
    "jetson_boards",
    "patches",
)
RPATH_KEYS = ("extra_rpaths", "dirs", "vendor_dir")
PREREQUISITE_KEYS = ("family", "platforms")
DOCTOR_KEYS = ("min_ram_gib", "disk_gib", "build_costs", "cmake_min", "cmake4_policy")
LINKAGE_KEYS = ("packages", "libraries", "static_symbol")
PATCHES_KEYS = ("upstream", "index")


@dataclass(frozen=True)
class FamilyRules:
    """What spec validation requires of a family: its profile's `spec:` over the registry defaults."""

    version: Versioning  # the profile's `version:` (a kind or a fixed default), read once
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


SPEC_KEYS = tuple(f.name for f in fields(FamilyRules))


@dataclass(frozen=True)
class Prerequisite:
    """A family a plan builds before this one, once per CUDA variant, on the listed platforms only
    (elsewhere there is no package of it and the recipe does without it)."""

    family: str
    platforms: tuple[str, ...]


@dataclass(frozen=True)
class DoctorNeeds:
    """What `condapipe doctor` checks a machine against for one variant of the family."""

    min_ram_gib: float  # below this even MAX_JOBS=1 is expected to be killed by the OOM killer
    disk_gib: Mapping[str, float]  # per variant kind (cuda, cpu), when no measured costs exist
    build_costs: Path | None  # the measured figures (a YAML file), or None
    cmake_min: tuple[tuple[str, str], ...]  # (PEP 440 range of the family's version, oldest CMake)
    cmake4_policy: bool  # CMake >= 4 needs CMAKE_POLICY_VERSION_MINIMUM for its CMakeLists


@dataclass(frozen=True)
class Linkage:
    """The libraries a family's packages provide to a package whose run requirements name them."""

    packages: tuple[str, ...]  # globs of the dependency names that carry them (conda-forge's too)
    libraries: tuple[str, ...]  # globs of the DT_NEEDED names they provide
    # a symbol every package that links this family statically defines (magma_init for magma):
    # verify's proof that a prerequisite linked statically is in the package; None if not static
    static_symbol: str | None = None


@dataclass(frozen=True)
class PatchSource:
    """Which patch catalog entries a family's builds get: those whose `package` is `upstream`, in the
    catalog `index` (None: condapipe's own patches/index.yaml). An empty `upstream`: none."""

    upstream: str
    index: Path | None


@dataclass(frozen=True)
class FamilyProfile:
    """One family, as its registry line and profile folder describe it."""

    name: str  # as users type it: "cuda-smoke"
    folder: str  # its folder under recipes/
    model: str  # the render builder: condapipe.render.families.<model>
    path: Path  # the profile folder itself
    rules: FamilyRules
    rpath: Mapping[str, Any]  # extra_rpaths, dirs ({glob, rpath}), vendor_dir
    prerequisites: tuple[Prerequisite, ...]  # families a plan builds first, once per CUDA variant
    upload_ranks: tuple[tuple[str, int], ...]  # (package-name glob, rank)
    doctor: DoctorNeeds
    linkage: Linkage
    jetson_boards: tuple[str, ...]  # globs of the `--jetson` boards it takes (empty: none)
    patches: PatchSource
    facts: Mapping[str, Any]  # the rest of family.yaml: what the render builder reads

    def prerequisites_on(self, platform: str) -> tuple[str, ...]:
        """The families a plan for `platform` builds before this one."""
        return tuple(p.family for p in self.prerequisites if platform in p.platforms)

    def takes_board(self, board: str) -> bool:
        return any(fnmatchcase(board, pattern) for pattern in self.jetson_boards)


@dataclass(frozen=True)
class Registry:
    """recipes/families.yaml and the profiles it lists."""

    root: Path
    default_spec: Mapping[str, Any]
    default_rpath: Mapping[str, Any]
    profiles: Mapping[str, FamilyProfile]  # in registry order


# ------------------------------------------------------------------ where the profiles come from

_roots: list[Path] = []  # recipes_root() overrides, innermost last


def recipes_dir() -> Path:
    """The folder the registry and profiles are read from (the installed recipes/ by default)."""
    return _roots[-1] if _roots else Path(str(resources.files("condapipe.recipes")))


def recipes_override() -> Path | None:
    """The folder `recipes_root(...)` put in place of the installed recipes/, or None."""
    return _roots[-1] if _roots else None


@contextmanager
def recipes_root(root: Path) -> Iterator[Path]:
    """Read the registry, the profiles and the templates from `root` (laid out like recipes/) while
    the block runs, e.g. to render a family that is not installed."""
    _roots.append(Path(root))
    try:
        yield Path(root)
    finally:
        _roots.pop()


def registry() -> Registry:
    """The registry of the current recipes folder."""
    return load_registry(recipes_dir())


# ------------------------------------------------------------------ reading


def _yaml(path: Path) -> Any:
    try:
        return YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a mapping")
    return dict(value)


def _unknown_keys(given: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UsageError(f"{where}: unknown keys {', '.join(unknown)}; valid: {', '.join(known)}")


def _rules(name: str | None, raw: dict[str, Any], where: str) -> FamilyRules:
    names = raw.get("package_names") or ([name] if name else [])
    return FamilyRules(
        version=versioning_of(str(raw["version"]), f"{where} version"),
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


def _keys(value: Any, keys: tuple[str, ...], where: str) -> dict[str, Any]:
    """A mapping that states exactly `keys`."""
    raw = _mapping(value, where)
    _unknown_keys(raw, keys, where)
    missing = [k for k in keys if k not in raw]
    if missing:
        raise UsageError(f"{where}: no {', '.join(missing)} (every key is stated)")
    return raw


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UsageError(f"{where}: expected a list")
    return tuple(str(v) for v in value)


def _prerequisites(value: Any, where: str) -> tuple[Prerequisite, ...]:
    out = []
    for item in value or []:
        raw = _keys(item, PREREQUISITE_KEYS, f"{where} entry")
        out.append(Prerequisite(str(raw["family"]), _strings(raw["platforms"], f"{where} platforms")))
    return tuple(out)


def _doctor(value: Any, folder: Path, where: str) -> DoctorNeeds:
    raw = _keys(value, DOCTOR_KEYS, where)
    disk = _keys(raw["disk_gib"], ("cuda", "cpu"), f"{where} disk_gib")
    costs = raw["build_costs"]
    # A file relative to the folder: its own, or another family's of the same tree (../pytorch/...).
    costs_file = (folder / str(costs)).resolve() if costs is not None else None
    if costs_file is not None and not (
        costs_file.is_relative_to(folder.parent.resolve()) and costs_file.is_file()
    ):
        raise UsageError(f"{where}: build_costs {costs!r}: no file {costs_file} in the recipes folder")
    return DoctorNeeds(
        min_ram_gib=float(raw["min_ram_gib"]),
        disk_gib=MappingProxyType({k: float(v) for k, v in disk.items()}),
        build_costs=costs_file,
        cmake_min=tuple(
            (str(k), str(v)) for k, v in _mapping(raw["cmake_min"], f"{where} cmake_min").items()
        ),
        cmake4_policy=bool(raw["cmake4_policy"]),
    )


def _linkage(value: Any, where: str) -> Linkage:
    if not value:
        return Linkage((), ())
    raw = _keys(value, LINKAGE_KEYS, where)
    symbol = raw["static_symbol"]
    if symbol is not None and (not isinstance(symbol, str) or not symbol.isidentifier()):
        raise UsageError(f"{where} static_symbol: {symbol!r} is not a C symbol name (or null)")
    return Linkage(
        _strings(raw["packages"], f"{where} packages"),
        _strings(raw["libraries"], f"{where} libraries"),
        symbol,
    )


def _patches(value: Any, folder: Path, where: str) -> PatchSource:
    if not value:
        return PatchSource("", None)
    raw = _mapping(value, where)
    _unknown_keys(raw, PATCHES_KEYS, where)
    if not raw.get("upstream"):
        raise UsageError(f"{where}: names no upstream (the catalog's `package` of its entries)")
    index = folder / str(raw["index"]) if raw.get("index") else None
    if index is not None and not index.is_file():
        raise UsageError(f"{where}: index {raw['index']!r}: no file {index}")
    return PatchSource(str(raw["upstream"]), index)


def _profile(name: str, entry: Any, root: Path, defaults: Mapping[str, Any]) -> FamilyProfile:
    where = f"{root / REGISTRY_FILE}: {name}"
    entry = _mapping(entry, where)
    _unknown_keys(entry, ("folder", "model"), where)
    if not entry.get("folder") or not str(entry.get("model") or "").isidentifier():
        raise UsageError(f"{where}: needs a folder and a model (a module name)")
    folder = str(entry["folder"])
    path = root / folder
    file = path / PROFILE_FILE
    raw = _mapping(_yaml(file), str(file))
    missing = [s for s in SECTIONS if s not in raw]
    if missing:
        raise UsageError(f"{file}: no {', '.join(missing)} section (an empty one is {{}} or [])")
    spec = _mapping(raw["spec"], f"{file}: spec")
    _unknown_keys(spec, SPEC_KEYS, f"{file}: spec")
    rpath = _mapping(raw["rpath"], f"{file}: rpath")
    _unknown_keys(rpath, RPATH_KEYS, f"{file}: rpath")
    ranks = []
    for rank in raw["upload_rank"] or []:
        if not isinstance(rank, dict) or "pattern" not in rank or "rank" not in rank:
            raise UsageError(f"{file}: upload_rank entries are {{pattern, rank, why}}")
        ranks.append((str(rank["pattern"]), int(rank["rank"])))
    return FamilyProfile(
        name=name,
        folder=folder,
        model=str(entry["model"]),
        path=path,
        rules=_rules(name, {**defaults["spec"], **spec}, f"{file}: spec"),
        rpath=MappingProxyType({**defaults["rpath"], **rpath}),
        prerequisites=_prerequisites(raw["prerequisites"], f"{file}: prerequisites"),
        upload_ranks=tuple(ranks),
        doctor=_doctor(raw["doctor"], path, f"{file}: doctor"),
        linkage=_linkage(raw["linkage"], f"{file}: linkage"),
        jetson_boards=_strings(raw["jetson_boards"], f"{file}: jetson_boards"),
        patches=_patches(raw["patches"], path, f"{file}: patches"),
        facts=MappingProxyType({k: v for k, v in raw.items() if k not in SECTIONS}),
    )


@cache
def load_registry(root: Path) -> Registry:
    """The registry in `root` (a folder laid out like recipes/) with every profile it lists.

    Cached per folder; `load_registry.cache_clear()` after editing a profile in place."""
    data = _mapping(_yaml(root / REGISTRY_FILE), str(root / REGISTRY_FILE))
    defaults = _mapping(data.get("defaults"), f"{root / REGISTRY_FILE}: defaults")
    profiles = {
        str(name): _profile(str(name), entry, root, defaults)
        for name, entry in _mapping(data.get("families"), f"{root / REGISTRY_FILE}: families").items()
    }
    for profile in profiles.values():
        unknown = [
            p.family for p in profile.prerequisites if p.family not in profiles or p.family == profile.name
        ]
        if unknown:
            raise UsageError(f"{profile.path / PROFILE_FILE}: prerequisites {unknown} are no other family")
    return Registry(
        root=root,
        default_spec=MappingProxyType(defaults["spec"]),
        default_rpath=MappingProxyType(defaults["rpath"]),
        profiles=MappingProxyType(profiles),
    )


# ------------------------------------------------------------------ what the stages ask


def known_packages() -> tuple[str, ...]:
    """Every family, as users type it: the families of recipes/families.yaml."""
    return tuple(sorted(registry().profiles))


def profiles() -> tuple[FamilyProfile, ...]:
    """Every family's profile, in registry order."""
    return tuple(registry().profiles.values())


def profile(package: str) -> FamilyProfile:
    """The profile of ``package``; UsageError listing the known packages if it is no family."""
    found = registry().profiles.get(package)
    if found is None:
        raise UsageError(f"unknown package {package!r}; choose one of {', '.join(known_packages())}")
    return found


def family_rules(package: str) -> FamilyRules:
    """Validation rules of ``package``; UsageError listing the known packages if unknown."""
    return profile(package).rules


def default_rules() -> FamilyRules:
    """The rules of a package that is no known family (e.g. a verified package of a recipe dir)."""
    return _rules(None, dict(registry().default_spec), f"{registry().root / REGISTRY_FILE}: defaults spec")


def default_rpath() -> Mapping[str, Any]:
    """The rpath rules of a package that is no known family."""
    return registry().default_rpath


def family_facts(package: str) -> dict[str, Any]:
    """The facts of ``package``'s profile its render builder reads (a copy: callers may change it)."""
    return copy.deepcopy(dict(profile(package).facts))


def family_of_package(name: str) -> str | None:
    """The family that builds the conda package ``name`` ("magma-cuda118" -> "magma"), or None."""
    for family in known_packages():
        if any(fnmatchcase(name, pattern) for pattern in family_rules(family).package_names):
            return family
    return None


def cuda_table_package(family: str, cuda: str) -> tables.MagmaInfo | None:
    """The package ``family`` builds for CUDA ``cuda`` when the CUDA table names it, else None.

    A family versioned by the table (`version: magma`) builds one package per CUDA, named,
    versioned and numbered by the table (magma-cuda118 2.6.1, build number 1).
    """
    return family_rules(family).version.table_package(cuda)

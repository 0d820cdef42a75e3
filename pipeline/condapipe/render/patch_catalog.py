"""The patch catalog: which upstream source fixes a build needs, and why.

Builds of unusual combinations (an old PyTorch with a new CUDA, magma on CUDA 13, Jetson) need
small, version-scoped fixes to upstream sources. Instead of editing sources by hand, every fix
is an entry in ``patches/index.yaml`` scoped by package version, CUDA version and platform, with
a one-line reason and the upstream issue. ``applicable()`` selects exactly the entries that
match one build, in catalog order (the order patches are applied), so that render can copy the
patch files into a recipe and emit the environment of "config" entries.

Patch files are unified diffs applied with strip level 1 (``a/…`` / ``b/…`` paths relative to
the upstream source root), which is what conda-build and rattler-build both apply.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from condapipe.buildspec.build_spec import PLATFORMS
from condapipe.errors import UsageError
from condapipe.safe_paths import read_regular_bytes

KINDS: tuple[str, ...] = ("patch", "config")
ANY_BOARD: object = object()  # applicable(board=...) left out: the build's Jetson board is unknown
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_ENV_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_ENTRY_KEYS = frozenset(
    {
        "id",
        "package",
        "kind",
        "patch",
        "targets",
        "versions",
        "cuda",
        "platforms",
        "reason",
        "upstream",
        "env",
        "checked_on",
        "boards",
    }
)


@dataclass(frozen=True)
class PatchEntry:
    """One catalog entry: a patch file or a configuration fix, and the builds it applies to."""

    id: str
    package: str
    kind: str  # "patch" | "config"
    patch_file: Path | None  # absolute path of the .patch (kind "patch"), else None
    target_files: tuple[str, ...]  # paths relative to the source root that the patch edits
    versions: str  # PEP 440 specifier of the package version ("" = every version)
    cuda: str  # PEP 440 specifier of the CUDA version ("" = with or without CUDA)
    platforms: tuple[str, ...]
    reason: str
    upstream: str  # where the problem is documented upstream (issue / PR)
    env: tuple[tuple[str, str], ...] = ()  # kind "config": variables render emits
    checked_on: tuple[str, ...] = ()  # upstream versions the patch was checked against
    boards: tuple[str, ...] = ()  # Jetson boards only ("*" = any board); () = not board-specific

    def matches(
        self,
        package: str,
        version: Version,
        cuda: Version | None,
        platform: str,
        board: str | object | None = ANY_BOARD,
    ) -> bool:
        """True when this entry applies to a build of `package` `version` with `cuda` on `platform`.

        `board` is the Jetson board of the build or None for any other machine; left out, the
        board is unknown and board-specific entries are selected by platform alone.
        """
        if package != self.package or platform not in self.platforms:
            return False
        on_listed_board = board is not None and ("*" in self.boards or board in self.boards)
        if self.boards and board is not ANY_BOARD and not on_listed_board:
            return False
        if not SpecifierSet(self.versions).contains(version, prereleases=True):
            return False
        if self.cuda:
            return cuda is not None and SpecifierSet(self.cuda).contains(cuda, prereleases=True)
        return True

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (used by `condapipe patches list --json`)."""
        return {
            "id": self.id,
            "package": self.package,
            "kind": self.kind,
            "patch_file": str(self.patch_file) if self.patch_file else None,
            "target_files": list(self.target_files),
            "versions": self.versions,
            "cuda": self.cuda,
            "platforms": list(self.platforms),
            "reason": self.reason,
            "upstream": self.upstream,
            "env": dict(self.env),
            "checked_on": list(self.checked_on),
            "boards": list(self.boards),
        }


@dataclass(frozen=True)
class Catalog:
    """All entries of one index.yaml, validated, in file order."""

    path: Path
    entries: tuple[PatchEntry, ...] = field(default_factory=tuple)

    def packages(self) -> tuple[str, ...]:
        return tuple(sorted({e.package for e in self.entries}))

    def get(self, entry_id: str) -> PatchEntry:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        raise UsageError(f"no patch catalog entry {entry_id!r}")


def default_index() -> Path:
    """The index.yaml shipped as package data `condapipe.patches`."""
    return Path(str(importlib.resources.files("condapipe.patches") / "index.yaml"))


def load_catalog(path: Path | None = None) -> Catalog:
    """Load and validate a catalog (default: the shipped one). Raises UsageError on any defect."""
    try:
        path = (Path(path) if path is not None else default_index()).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise UsageError(f"cannot read patch catalog {path}: {exc}") from None
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _load_cached(path, stamp)


@functools.lru_cache(maxsize=8)
def _load_cached(path: Path, stamp: int) -> Catalog:
    """Parse once per (path, modification time): render and the CLI call it repeatedly."""
    try:
        text = read_regular_bytes(path, max_bytes=16 << 20).decode("utf-8")  # a FIFO: refused, not read
    except UsageError as exc:
        raise UsageError(f"cannot read patch catalog {exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"patch catalog {path} is not UTF-8 text") from None
    try:
        data = YAML(typ="safe").load(text)
    except YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid YAML"
        raise UsageError(f"patch catalog {path} is not valid YAML: {first}") from None
    except RecursionError:
        raise UsageError(f"patch catalog {path} is nested too deeply to read") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise UsageError(f"patch catalog {path} must be a mapping with an 'entries' list")
    entries = tuple(_parse_entry(raw, i, path.parent) for i, raw in enumerate(data["entries"]))
    catalog = Catalog(path=path, entries=entries)
    problems = check_consistency(catalog)
    if problems:
        raise UsageError(f"patch catalog {path}: {problems[0]}")
    return catalog


def _parse_entry(raw: object, index: int, root: Path) -> PatchEntry:
    where = f"entry #{index + 1}"
    if not isinstance(raw, dict):
        raise UsageError(f"patch catalog {where} must be a mapping")
    if isinstance(raw.get("id"), str):
        where = f"entry {raw['id']!r}"
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise UsageError(f"patch catalog {where}: unknown key(s) {', '.join(map(str, unknown))}")

    def text(key: str, *, required: bool = True) -> str:
        value = raw.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str) or (required and not value.strip()):
            raise UsageError(f"patch catalog {where}: '{key}' must be a non-empty string")
        if "\n" in value:
            raise UsageError(f"patch catalog {where}: '{key}' must be one line")
        return value.strip()

    def str_list(key: str) -> tuple[str, ...]:
        value = raw.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise UsageError(f"patch catalog {where}: '{key}' must be a list of strings")
        return tuple(value)

    entry_id = text("id")
    if not _ID_RE.match(entry_id):
        raise UsageError(f"patch catalog {where}: id must be lowercase letters, digits, '.' and '-'")
    kind = text("kind")
    if kind not in KINDS:
        raise UsageError(f"patch catalog {where}: kind must be one of {', '.join(KINDS)}")
    versions = text("versions", required=False)
    cuda = text("cuda", required=False)
    for key, spec in (("versions", versions), ("cuda", cuda)):
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise UsageError(f"patch catalog {where}: '{key}' is not a PEP 440 range: {spec!r}") from None
    platforms = str_list("platforms")
    bad = [p for p in platforms if p not in PLATFORMS]
    if not platforms or bad:
        choices = ", ".join(PLATFORMS)
        raise UsageError(f"patch catalog {where}: platforms must be a non-empty list of {choices}")
    env_raw = raw.get("env") or {}
    if not isinstance(env_raw, dict) or not all(
        isinstance(k, str) and _ENV_RE.match(k) and isinstance(v, (str, int)) for k, v in env_raw.items()
    ):
        raise UsageError(f"patch catalog {where}: env must map VARIABLE_NAMES to strings")
    env = tuple((k, str(v)) for k, v in env_raw.items())
    patch_rel = text("patch", required=False)
    if kind == "patch":
        if not patch_rel:
            raise UsageError(f"patch catalog {where}: kind 'patch' needs a 'patch' file")
        if env:
            raise UsageError(f"patch catalog {where}: kind 'patch' cannot set env (use a 'config' entry)")
    elif patch_rel or raw.get("targets"):
        raise UsageError(f"patch catalog {where}: kind 'config' has no patch file or targets")
    elif not env:
        raise UsageError(f"patch catalog {where}: kind 'config' needs 'env'")
    boards = str_list("boards")
    if boards and any(p != "linux-aarch64" for p in platforms):
        raise UsageError(
            f"patch catalog {where}: entries for Jetson boards are for platform linux-aarch64 only"
        )
    checked_on = str_list("checked_on")
    for v in checked_on:
        try:
            Version(v)
        except InvalidVersion:
            raise UsageError(f"patch catalog {where}: checked_on has an invalid version {v!r}") from None
    return PatchEntry(
        id=entry_id,
        package=text("package"),
        kind=kind,
        patch_file=(root / patch_rel).resolve() if patch_rel else None,
        target_files=str_list("targets"),
        versions=versions,
        cuda=cuda,
        platforms=platforms,
        reason=text("reason"),
        upstream=text("upstream"),
        env=env,
        checked_on=checked_on,
        boards=boards,
    )


def diff_target(line: str) -> str | None:
    """The file a unified diff's `+++ b/path` header line names (strip level 1); None for other lines."""
    if not line.startswith("+++ "):
        return None
    name = line[4:].split("\t")[0].strip()
    return name[2:] if name.startswith("b/") else name


def patch_targets(patch_file: Path) -> tuple[str, ...]:
    """The files a unified diff edits, relative to the source root (strip level 1), in order."""
    targets: list[str] = []
    for line in patch_file.read_text(encoding="utf-8", errors="replace").splitlines():
        name = diff_target(line)
        if name is not None and name != "/dev/null" and name not in targets:
            targets.append(name)
    return tuple(targets)


def check_consistency(catalog: Catalog) -> list[str]:
    """Every defect of a catalog, one line each (empty when the catalog is sound).

    Checked: unique ids; patch files exist inside the catalog folder under <package>/, are
    unified diffs with strip level 1, edit exactly the declared targets and are used once;
    checked_on versions lie inside the entry's range; no two entries that can apply to the
    same build set one variable to different values.
    """
    problems: list[str] = []
    root = catalog.path.parent.resolve()
    seen: dict[str, PatchEntry] = {}
    for entry in catalog.entries:
        if entry.id in seen:
            problems.append(f"duplicate id {entry.id!r}")
        seen[entry.id] = entry
        for v in entry.checked_on:
            if not SpecifierSet(entry.versions).contains(Version(v), prereleases=True):
                problems.append(f"{entry.id}: checked_on {v} is outside its range {entry.versions!r}")
        if entry.patch_file is None:
            continue
        pf = entry.patch_file
        if not pf.is_relative_to(root / entry.package):
            problems.append(f"{entry.id}: patch file must live under {entry.package}/ in the catalog folder")
        if not pf.is_file():
            problems.append(f"{entry.id}: patch file {pf} does not exist")
            continue
        targets = patch_targets(pf)
        if not targets:
            problems.append(f"{entry.id}: {pf.name} is not a unified diff")
        elif set(targets) != set(entry.target_files):
            declared, edited = sorted(entry.target_files), sorted(targets)
            problems.append(f"{entry.id}: targets {declared} differ from what {pf.name} edits {edited}")
    known_boards = _jetson_boards()
    for entry in catalog.entries:
        unknown = [b for b in entry.boards if b != "*" and known_boards and b not in known_boards]
        if unknown:
            problems.append(
                f"{entry.id}: unknown Jetson board {unknown[0]!r} (known: {', '.join(known_boards)})"
            )
    by_name: dict[tuple[str, str], str] = {}
    for entry in catalog.entries:
        if entry.patch_file is not None:
            key = (entry.package, entry.patch_file.name)
            if by_name.setdefault(key, entry.id) != entry.id:
                other = by_name[key]
                problems.append(f"{entry.id}: file name {key[1]} is also used by {other}")
    by_file: dict[Path, str] = {}
    for entry in catalog.entries:
        if entry.patch_file is not None:
            if entry.patch_file in by_file:
                problems.append(f"{entry.id}: patch file also used by {by_file[entry.patch_file]}")
            by_file.setdefault(entry.patch_file, entry.id)
    entries = catalog.entries
    for i, a in enumerate(entries):
        for b in entries[i + 1 :]:
            clash = {k: (va, dict(b.env)[k]) for k, va in a.env if k in dict(b.env) and dict(b.env)[k] != va}
            if clash and overlap(a, b):
                var, (va, vb) = next(iter(clash.items()))
                problems.append(f"{a.id} and {b.id} both apply to some builds but set {var}={va} vs {vb}")
    return problems


def _jetson_boards() -> tuple[str, ...]:
    """Board names of condapipe.facts.jetson (empty when that table is not available)."""
    try:
        from condapipe.facts import jetson
    except ImportError:
        return ()
    return tuple(jetson.boards())


def overlap(a: PatchEntry, b: PatchEntry) -> bool:
    """True when some build (version, CUDA, platform) selects both entries."""
    if a.package != b.package or not set(a.platforms) & set(b.platforms):
        return False
    if a.boards and b.boards and "*" not in a.boards + b.boards and not set(a.boards) & set(b.boards):
        return False
    if not _ranges_meet(a.versions, b.versions):
        return False
    if a.cuda and b.cuda:
        return _ranges_meet(a.cuda, b.cuda)
    return True


def _ranges_meet(x: str, y: str) -> bool:
    """Whether two PEP 440 ranges share a version.

    A non-empty intersection of interval unions contains one of its bounds or a version just
    above one, so testing those candidates decides it.
    """
    candidates = {"0", "999999"}
    for spec in (*SpecifierSet(x), *SpecifierSet(y)):
        base = spec.version.rstrip(".*")
        candidates |= {base, base + ".0.0.0.0.1"}
    both = SpecifierSet(x) & SpecifierSet(y)
    return any(both.contains(Version(c), prereleases=True) for c in candidates if _is_version(c))


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def parse_version(text: str, what: str = "version", example: str = "1.13.0") -> Version:
    """A PEP 440 version from user input, or a one-line UsageError."""
    try:
        return Version(text)
    except InvalidVersion:
        raise UsageError(f"invalid {what} {text!r}: expected a version like {example}") from None


def cuda_version(cuda: str | None) -> Version | None:
    """The CUDA version of a build (None for a CPU build); a CUDA the tables do not know is still
    a version a catalog range can hold, so only the spelling is checked."""
    if cuda is None or cuda.strip().lower() in ("", "cpu", "none"):
        return None
    return parse_version(cuda.strip(), "CUDA version", "12.4 (or cpu)")


def applicable(
    package: str,
    version: str,
    cuda: str | None,
    platform: str,
    *,
    board: str | object | None = ANY_BOARD,
    catalog: Catalog | None = None,
) -> list[PatchEntry]:
    """The entries that apply to one build, in catalog order (the order patches are applied).

    `cuda` is a version like "11.8", or None / "cpu" for a CPU build (entries with a CUDA range
    never apply to those). `board` is the Jetson board ("tx2", ...) or None for a build that is
    not for a Jetson (e.g. an aarch64 server); left out, Jetson entries follow the platform.
    Raises UsageError for an invalid version or unknown platform.
    """
    cat = catalog if catalog is not None else load_catalog()
    if platform not in PLATFORMS:
        raise UsageError(f"unknown platform {platform!r}; choose one of {', '.join(PLATFORMS)}")
    v = parse_version(version)
    c = cuda_version(cuda)
    return [e for e in cat.entries if e.matches(package, v, c, platform, board)]


def config_env(entries: Iterable[PatchEntry]) -> dict[str, str]:
    """The environment variables of the selected "config" entries, in catalog order."""
    env: dict[str, str] = {}
    for entry in entries:
        env.update(entry.env)
    return env


def patch_files(entries: Sequence[PatchEntry]) -> list[Path]:
    """The patch files of the selected entries, in application order."""
    return [e.patch_file for e in entries if e.patch_file is not None]

"""rpath rules: what each ELF file's search path must be after `condapipe fix`.

conda-build's semantics (keep `$ORIGIN` entries, make in-prefix absolute entries relative,
drop the rest, append the recipe's extra rpaths) plus per-directory rules per package
family, e.g. pytorch/builder's `$ORIGIN:$ORIGIN/lib:$ORIGIN/../../..` for `torch/*.so`.
Each family's rules are the `rpath:` section of its profile (condapipe.facts.families); what
holds for every family lives in data/rpath_rules.yaml.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources

from ruamel.yaml import YAML

from condapipe.elf.rpath_entries import ORIGIN_PREFIXES, split_rpath
from condapipe.errors import UsageError
from condapipe.facts.families import default_rpath, known_packages, profile


@dataclass(frozen=True)
class DirRule:
    """Files matching `glob` (per path component, relative to the prefix) get `rpath`."""

    glob: str
    rpath: tuple[str, ...]

    def matches(self, relpath: str) -> bool:
        parts = relpath.split("/")
        pattern = self.glob.split("/")
        return len(parts) == len(pattern) and all(
            fnmatchcase(p, g) for p, g in zip(parts, pattern, strict=True)
        )


@dataclass(frozen=True)
class RpathRules:
    """The rule set of one package family."""

    family: str = "default"
    extra_rpaths: tuple[str, ...] = ("lib",)
    dirs: tuple[DirRule, ...] = ()
    vendor_dir: str = "lib"
    keep_names: tuple[str, ...] = ()

    def with_extra(self, extra: tuple[str, ...]) -> RpathRules:
        """The same rules plus recipe-requested extra rpaths."""
        merged = tuple(dict.fromkeys((*self.extra_rpaths, *extra)))
        return RpathRules(self.family, merged, self.dirs, self.vendor_dir, self.keep_names)

    def keeps_name(self, filename: str) -> bool:
        return any(fnmatchcase(filename, pat) for pat in self.keep_names)


@dataclass(frozen=True)
class RpathDecision:
    """The new rpath entries of one file and why entries were dropped."""

    entries: tuple[str, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def value(self) -> str:
        return ":".join(self.entries)


@cache
def _data() -> dict:
    text = resources.files("condapipe.data").joinpath("rpath_rules.yaml").read_text()
    return YAML(typ="safe").load(text)


def families() -> tuple[str, ...]:
    """The names `rules_for` knows: "default" (a package of no family) and every family."""
    return ("default", *known_packages())


def rules_for(family: str | None) -> RpathRules:
    """Rules of a package family (its profile's `rpath:`); a package of no family (None or
    "default": a recipe dir's package, `condapipe fix` without --family) gets the registry's
    default rules. A name outside the registry is a UsageError: a misspelt family must not be
    fixed with another's rules."""
    if family is None or family == "default":
        table, name = default_rpath(), "default"
    else:
        table, name = profile(family).rpath, family
    return RpathRules(
        family=name,
        extra_rpaths=tuple(table.get("extra_rpaths", [])),
        dirs=tuple(DirRule(d["glob"], tuple(d["rpath"])) for d in table.get("dirs", [])),
        vendor_dir=table.get("vendor_dir", "lib"),
        keep_names=tuple(_data().get("keep_names", [])),
    )


@cache
def _marker_re() -> re.Pattern[str]:
    return re.compile("^(?:" + "|".join(_data()["build_prefix_markers"]) + ")$")


def guess_build_prefix(path: str) -> str | None:
    """The build prefix an absolute path lies in, recognised by conda/rattler placeholder names."""
    if not path.startswith("/"):
        return None
    parts = path.split("/")
    for i, part in enumerate(parts):
        if part and _marker_re().match(part):
            return "/".join(parts[: i + 1])
    return None


def origin_relative(target_dir: str, file_relpath: str) -> str:
    """`$ORIGIN/...` reaching `target_dir` (relative to the prefix) from the file's directory."""
    rel = posixpath.relpath(posixpath.normpath(target_dir) or ".", posixpath.dirname(file_relpath) or ".")
    return "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"


def _in_prefix(entry: str, prefixes: tuple[str, ...]) -> str | None:
    """The part of `entry` below the first prefix that contains it, or None."""
    norm = posixpath.normpath(entry)
    for prefix in prefixes:
        p = posixpath.normpath(prefix)
        if norm == p:
            return "."
        if norm.startswith(p + "/"):
            return norm[len(p) + 1 :]
    return None


def decide(
    file_relpath: str,
    old_rpath: str | None,
    rules: RpathRules,
    *,
    prefixes: tuple[str, ...] = (),
) -> RpathDecision:
    """New rpath of `file_relpath` (relative to the prefix) from its old rpath and the rules."""
    if file_relpath.startswith("/") or ".." in file_relpath.split("/"):
        raise UsageError(f"file path must be relative to the prefix: {file_relpath}")
    warnings: list[str] = []
    entries: list[str] = []
    rule = next((r for r in rules.dirs if r.matches(file_relpath)), None)
    if rule is not None:
        entries.extend(rule.rpath)
    else:
        for entry in split_rpath(old_rpath):
            if entry.startswith(ORIGIN_PREFIXES):
                entries.append(entry)
                continue
            inside = _in_prefix(entry, prefixes) if entry.startswith("/") else None
            if inside is None and entry.startswith("/"):
                guessed = guess_build_prefix(entry)
                inside = _in_prefix(entry, (guessed,)) if guessed else None
            if inside is not None:
                entries.append(origin_relative(inside, file_relpath))
            else:
                warnings.append(f"{file_relpath}: rpath {entry} is outside the prefix (removing it)")
    entries.extend(origin_relative(extra, file_relpath) for extra in rules.extra_rpaths)
    return RpathDecision(tuple(dict.fromkeys(_tidy(e) for e in entries)), tuple(warnings))


def same_search_path(old: str | None, new: str) -> bool:
    """Whether the loader searches `old` exactly as `new`: the same entries in the same order once
    tidied (`$ORIGIN/` is `$ORIGIN`; a repeated entry adds nothing). An engine's relinking that
    differs only so is left as it wrote it: nothing to rewrite, nothing to repack. An empty entry
    (the working directory) is never the same."""
    if old and "" in old.split(":"):
        return False
    return ":".join(dict.fromkeys(_tidy(e) for e in split_rpath(old))) == new


def _tidy(entry: str) -> str:
    """`$ORIGIN/./lib/` -> `$ORIGIN/lib`, `${ORIGIN}` kept as written."""
    for origin in ORIGIN_PREFIXES:
        if entry.startswith(origin):
            rest = entry[len(origin) :]
            if not rest.strip("/"):
                return origin
            if rest.startswith("/"):
                norm = posixpath.normpath(rest[1:])
                return origin if norm == "." else f"{origin}/{norm}"
    return entry

"""Files whose build-machine path the recipe's author declared intended, as each engine lets them.

verify refuses a text file that names a build prefix or work directory: installed elsewhere it
points at a folder that does not exist. Each engine lets an author say "this file is fine as it
is", and the package carries the rendered recipe that says it: conda-build's
`build: ignore_prefix_files: true | [paths]` (info/recipe/meta.yaml) and rattler-build's
`build: prefix_detection: ignore: true | [globs]` (info/recipe/rendered_recipe.yaml). Such a file
is reported as a warning, not an error. Nothing else excuses a leak.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What the error says to do, by the kind of file (pip's record of where it installed from first).
DIRECT_URL_HINT = (
    "pip records the folder it installed from: delete it in the build script "
    "(rm $SP_DIR/*.dist-info/direct_url.json), or declare it (conda-build: build/"
    "ignore_prefix_files; rattler-build: build/prefix_detection/ignore)"
)
GENERIC_HINT = (
    "rewrite the path in the build script, or declare the file an intended exception "
    "(conda-build: build/ignore_prefix_files; rattler-build: build/prefix_detection/ignore)"
)


@dataclass(frozen=True)
class PrefixExceptions:
    """The recipe's declaration: every file (`everything`), or these paths / globs."""

    everything: bool = False
    patterns: tuple[str, ...] = ()
    declared_in: str = ""

    def covers(self, rel: str) -> bool:
        return self.everything or any(rel == p or fnmatch.fnmatchcase(rel, p) for p in self.patterns)


def _load_yaml(path: Path) -> Any:
    from ruamel.yaml import YAML, YAMLError

    try:
        return YAML(typ="safe", pure=True).load(path.read_text(errors="replace"))
    except (OSError, YAMLError, ValueError):
        return None


def _declared(value: Any) -> tuple[bool, tuple[str, ...]]:
    if value is True:
        return True, ()
    if isinstance(value, list):
        return False, tuple(str(v) for v in value if isinstance(v, str | int))
    if isinstance(value, str) and value.strip():
        return False, (value.strip(),)
    return False, ()


def declared_exceptions(root: Path) -> PrefixExceptions:
    """What the package's own rendered recipe declares (nothing when it carries none)."""
    rattler = _load_yaml(root / "info" / "recipe" / "rendered_recipe.yaml")
    if isinstance(rattler, dict):
        build = (
            ((rattler.get("recipe") or {}).get("build") or {})
            if isinstance(rattler.get("recipe"), dict)
            else {}
        )
        detection = build.get("prefix_detection") if isinstance(build, dict) else None
        if isinstance(detection, dict):
            everything, patterns = _declared(detection.get("ignore"))
            return PrefixExceptions(everything, patterns, "build/prefix_detection/ignore")
        return PrefixExceptions()
    conda_build = _load_yaml(root / "info" / "recipe" / "meta.yaml")
    if isinstance(conda_build, dict) and isinstance(conda_build.get("build"), dict):
        everything, patterns = _declared(conda_build["build"].get("ignore_prefix_files"))
        return PrefixExceptions(everything, patterns, "build/ignore_prefix_files")
    return PrefixExceptions()


def leak_hint(rel: str) -> str:
    """One line saying what to do about a file that names the build machine."""
    return DIRECT_URL_HINT if rel.endswith(".dist-info/direct_url.json") else GENERIC_HINT

"""Which of the engines' own test recipes build offline here: the upstream parity test's selection.

A checkout of conda-build's tests/test-recipes or rattler-build's test-data/recipes holds recipes
that download sources, need compilers or packages no local channel has, or target Windows/macOS.
Offline-buildable here means, read from the recipe text (no engine runs to decide): no remote
source (url, git, svn, hg), no `compiler(...)`, and every requirement named in a requirements or
test section is one of the packages the local dependency channel carries (python, pip,
setuptools, wheel: `condapipe wheels --python`). A recipe the rule lets through can still fail;
then both sides must fail.
"""

from __future__ import annotations

import re
from pathlib import Path

LOCAL_PACKAGES = frozenset({"python", "pip", "setuptools", "wheel"})
_REMOTE = re.compile(r"^\s*-?\s*(?:url|git_url|svn_url|hg_url|git|fn):", re.M)
_COMPILER = re.compile(r"\bcompiler\(|\bstdlib\(")
_SECTION = re.compile(r"^(\s*)(?:build|host|run|requires|run_constrained|run_constraints):\s*$")
_ITEM = re.compile(r"^\s*-\s+(?:\{\{\s*)?['\"]?([A-Za-z_][A-Za-z0-9_.\-]*)")
_OTHER_OS = re.compile(r"^\s*(?:-\s*)?skip:\s*(?:true|True)\s*#\s*\[(?:not\s+)?(?:win|osx)\]\s*$", re.M)


def required_names(text: str) -> set[str]:
    """Names listed under requirement sections of a recipe's text (a crude reader on purpose:
    it may name too much, which only leaves a recipe out)."""
    names: set[str] = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        section = _SECTION.match(line)
        if not section:
            continue
        indent = len(section.group(1))
        for item in lines[i + 1 :]:
            if not item.strip() or item.strip().startswith("#"):
                continue
            if len(item) - len(item.lstrip()) <= indent and not item.lstrip().startswith("-"):
                break
            match = _ITEM.match(item)
            if match and match.group(1) not in ("if", "then", "else", "pin_subpackage", "pin_compatible"):
                names.add(match.group(1).lower())
    return names


def offline_buildable(recipe_file: Path) -> bool:
    text = recipe_file.read_text(errors="replace")
    siblings = " ".join(p.name for p in recipe_file.parent.iterdir())
    if _REMOTE.search(text) or _COMPILER.search(text) or _OTHER_OS.search(text):
        return False
    if "bld.bat" in siblings and "build.sh" not in siblings and "script" not in text:
        return False  # a Windows-only build script
    own = {m.lower() for m in re.findall(r"^\s*-?\s*name:\s*['\"]?([A-Za-z0-9_.\-]+)", text, re.M)}
    return required_names(text) <= LOCAL_PACKAGES | own


def select(root: Path, recipe_name: str) -> list[Path]:
    """The offline-buildable recipe dirs under `root` (recipe_name: meta.yaml or recipe.yaml)."""
    found = sorted(p.parent for p in root.rglob(recipe_name))
    return [d for d in found if offline_buildable(d / recipe_name)]

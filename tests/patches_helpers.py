"""Helpers for the patch tests: write small source trees, real unified diffs and catalogs."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML


def unified_diff(path: str, old: str, new: str, *, context: int = 3) -> str:
    """A unified diff of one file with a/ b/ prefixes (strip level 1), as `git diff` writes it."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
        n=context,
    )
    return "".join(lines)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (relative path -> text) under root."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def entry(entry_id: str, **fields: Any) -> dict[str, Any]:
    """A catalog entry with sensible defaults (package 'demo', every version, both platforms)."""
    base: dict[str, Any] = {
        "id": entry_id,
        "package": "demo",
        "kind": "patch",
        "versions": "",
        "cuda": "",
        "platforms": ["linux-64", "linux-aarch64"],
        "reason": f"reason for {entry_id}",
        "upstream": "example/project#1",
    }
    base.update(fields)
    return base


def write_catalog(root: Path, entries: list[dict[str, Any]], patches: dict[str, str] | None = None) -> Path:
    """Write index.yaml (and patch files, relative to root) and return the index path."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in (patches or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    index = root / "index.yaml"
    with index.open("w") as fh:
        YAML().dump({"entries": entries}, fh)
    return index

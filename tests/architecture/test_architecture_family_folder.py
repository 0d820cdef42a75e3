"""A family is one folder: no data table keys anything by family, and no code finds a family's code or
facts by a computed name.

What a family needs from doctor, verify, --jetson, the patch catalog and the plan's prerequisites
is its profile's (recipes/<family>/family.yaml), read through condapipe.facts.families; a table in
data/ that grew a `families:` mapping again, or a `getattr(module, f"has_{name}")` lookup, would
bring back the facts a new family silently misses. Sources are read with ast (nothing is imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

from ruamel.yaml import YAML

from condapipe.facts.families import known_packages

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "pipeline" / "condapipe"


def computed_lookups(source: str) -> list[str]:
    """getattr / hasattr calls whose attribute name is built at run time (an f-string or a + join)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], (ast.JoinedStr, ast.BinOp))
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_sees_a_computed_lookup() -> None:
    assert computed_lookups('check = getattr(module, f"has_{family}", None)')
    assert computed_lookups('hasattr(module, "has_" + family)')
    assert not computed_lookups('getattr(event, "level", "info")')


def test_no_module_finds_code_by_a_computed_name() -> None:
    offences = {
        str(p.relative_to(ROOT)): computed_lookups(p.read_text(encoding="utf-8"))
        for p in PACKAGE_DIR.rglob("*.py")
    }
    assert not {k: v for k, v in offences.items() if v}


def test_no_data_table_is_keyed_by_family() -> None:
    families = set(known_packages())
    keyed = {}
    for table in sorted((PACKAGE_DIR / "data").glob("*.yaml")):
        data = YAML(typ="safe").load(table.read_text(encoding="utf-8"))
        top = set(data) if isinstance(data, dict) else set()
        bad = top & (families | {"default_family"})
        if isinstance(data, dict) and isinstance(data.get("families"), (dict, list)):  # not GPU families
            bad |= {f"families: {name}" for name in set(data["families"]) & families}
        if bad:
            keyed[table.name] = sorted(bad)
    assert not keyed, f"per-family data belongs in recipes/<family>/family.yaml: {keyed}"

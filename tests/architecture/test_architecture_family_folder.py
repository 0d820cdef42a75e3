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


def version_kind_branches(source: str) -> list[str]:
    """Comparisons of a family's `version` (rules.version, family_rules(f).version) with a string:
    the code paths a profile's `version:` kind picks belong to its strategy in facts/versioning.py."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        asks_rules = any(
            isinstance(s, ast.Attribute) and s.attr == "version" and "rules" in ast.unparse(s.value)
            for s in sides
        )
        if asks_rules and any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_sees_a_branch_on_the_version_kind() -> None:
    assert version_kind_branches('if rules.version == "magma": pass')
    assert version_kind_branches('ok = family_rules(family).version != "torchvision"')
    assert not version_kind_branches('if spec.version == "2.4.1": pass')
    assert not version_kind_branches("if rules.version.torch_release: pass")


def test_no_module_branches_on_the_profile_version_kind() -> None:
    offences = {
        str(p.relative_to(ROOT)): version_kind_branches(p.read_text(encoding="utf-8"))
        for p in PACKAGE_DIR.rglob("*.py")
    }
    assert not {k: v for k, v in offences.items() if v}

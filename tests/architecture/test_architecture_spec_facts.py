"""Every CUDA fact is decided once: nothing outside the facts library (pipeline/condapipe/facts/, which
reads the tables) and the spec stage (pipeline/condapipe/buildspec/, which resolves them into a
CudaVariant) reads data/cuda.yaml or calls the CUDA-table functions of condapipe.facts.tables; the
family registry lives in the facts library; the arch parser, the tables and `native` import each other
in one direction only; neither asks render which families exist.

Sources are read with ast (nothing is imported), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from condapipe.facts.families import known_packages

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "pipeline" / "condapipe"
FACTS_DIR = PACKAGE_DIR / "facts"
SPEC_DIRS = (FACTS_DIR, PACKAGE_DIR / "buildspec")
TABLES = FACTS_DIR / "tables.py"
CUDA_YAML = re.compile(r"(^|/)cuda\.yaml$")


def _top_level_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def cuda_table_names() -> frozenset[str]:
    """The names of tables.py that read the CUDA table: functions that open cuda.yaml, and every
    function that calls one of those (found to a fixpoint), plus the row type CudaInfo."""
    functions = _top_level_functions(ast.parse(TABLES.read_text(encoding="utf-8")))
    uses = {
        name: {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        | {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        for name, fn in functions.items()
    }
    found = {name for name, used in uses.items() if "cuda.yaml" in used}
    while True:
        more = {name for name, used in uses.items() if used & found} - found
        if not more:
            return frozenset(found | {"CudaInfo"})
        found |= more


def offences(source: str, forbidden: frozenset[str]) -> list[str]:
    """Where `source` reads the CUDA table: imports or attribute uses of a forbidden tables name,
    or a string naming cuda.yaml (a path or resource name, not prose)."""
    found: list[str] = []
    tree = ast.parse(source)
    aliases = {"condapipe.facts.tables"}  # names under which the tables module is reachable
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "condapipe.facts.tables":
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in forbidden]
        elif isinstance(node, ast.ImportFrom) and node.module == "condapipe.facts":
            aliases.update(a.asname or a.name for a in node.names if a.name == "tables")
        elif isinstance(node, ast.Import):
            aliases.update(a.asname or a.name for a in node.names if a.name == "condapipe.facts.tables")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in forbidden and ast.unparse(node.value) in aliases:
            found.append(f"line {node.lineno}: uses {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and CUDA_YAML.search(node.value):
            found.append(f"line {node.lineno}: names {node.value!r}")
    return found


def _outside_spec() -> list[Path]:
    files = [p for p in PACKAGE_DIR.rglob("*.py") if not any(d in p.parents for d in SPEC_DIRS)]
    files += sorted((ROOT / "scripts").glob("*.py"))
    return sorted(p for p in files if "__pycache__" not in p.parts)


def test_the_cuda_table_functions_are_found() -> None:
    names = cuda_table_names()
    assert {"cuda_info", "cuda_versions", "normalize_cuda", "link_overflow_max_images"} <= names
    assert "pytorch_info" not in names  # series facts may still be read by render families


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from condapipe.facts.tables import cuda_info\n", "imports cuda_info"),
        ("from condapipe.facts import tables\nx = tables.cuda_versions()\n", "uses tables.cuda_versions"),
        ("import condapipe.facts.tables as t\nt.cuda_info('11.8')\n", "uses t.cuda_info"),
        ("def f():\n    from condapipe.facts.tables import normalize_cuda\n", "imports normalize_cuda"),
        ("p = files('condapipe.data').joinpath('cuda.yaml')\n", "names 'cuda.yaml'"),
    ],
)
def test_the_scan_catches_every_way_of_reading_the_cuda_table(source: str, expected: str) -> None:
    found = offences(source, cuda_table_names())
    assert len(found) == 1 and expected in found[0]


def test_series_facts_and_prose_are_not_offences() -> None:
    allowed = (
        'from condapipe.facts import tables\ntables.pytorch_info("2.4.1")\nraise E("add it to cuda.yaml")\n'
    )
    assert offences(allowed, cuda_table_names()) == []


def test_no_module_outside_the_spec_stage_reads_the_cuda_table() -> None:
    forbidden = cuda_table_names()
    bad = {
        str(p.relative_to(ROOT)): found
        for p in _outside_spec()
        if (found := offences(p.read_text(encoding="utf-8"), forbidden))
    }
    assert not bad, f"read the spec's CudaVariant instead: {bad}"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_tables_and_native_sit_below_the_arch_parser() -> None:
    for low in ("tables.py", "native.py"):
        imported = {
            m for m in _imports(FACTS_DIR / low) if m.startswith(("condapipe.facts", "condapipe.buildspec"))
        }
        assert not imported, f"facts/{low} imports {imported}: the arch parser builds on it, not back"


def test_the_spec_stage_never_asks_render_which_families_exist() -> None:
    back = {
        str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.startswith("condapipe.render"))
        for d in SPEC_DIRS
        for p in d.rglob("*.py")
    }
    assert not {k: v for k, v in back.items() if v}


def test_every_registered_family_has_a_render_builder_and_every_builder_is_used() -> None:
    from condapipe.facts.families import profiles
    from condapipe.render import families

    modules = {m.name for m in pkgutil.iter_modules(families.__path__) if m.name[0] != "_"}
    # A family names its builder (`model`); `script` renders a family from its profile alone.
    assert modules == {p.model for p in profiles()} | {"script"}
    for name in known_packages():
        assert callable(families.family_for(name).build_model)
        assert importlib.import_module(families.module_name(name)) is families.family_for(name)

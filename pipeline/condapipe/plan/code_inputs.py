"""The code a step kind runs, as one digest: computed from the real imports, not from a hand-kept list.

A finished multi-hour build must survive an unrelated code change, but a changed fixer must
re-fix and a changed verifier re-verify. So the input hash of render, fix and verify steps
includes the source of every condapipe module their entry module reaches — followed through the
`import` statements of each file (read with ast, nothing is imported; imports inside functions
count, and so does each package's `__init__.py`, which runs first) — plus the data folders that
code reads. A package that loads its own submodules by name (`importlib.import_module`, e.g.
render's families) reaches all of them. Of the data tables, a step takes the ones its reached
code names (a string constant equal to a file name in condapipe/data, e.g. "cuda.yaml"): editing
the doctor's table or a flag's help text re-runs no render, fix or verify.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path

PACKAGE = "condapipe"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the directory of condapipe/__init__.py

# step kind -> the module that implements it (what condapipe.plan.steps calls for that kind).
ENTRY_MODULES: dict[str, tuple[str, ...]] = {
    "render": ("condapipe.render.recipe_dir",),
    "fix": ("condapipe.fix.fixer",),
    "verify": ("condapipe.verify.verifier",),
}
# step kind -> resource packages read whole at run time (render reads the family profiles,
# templates and patches); the tables in condapipe.data are taken per file, see _tables_named.
DATA_PACKAGE = "condapipe.data"
RESOURCES: dict[str, tuple[str, ...]] = {
    "render": ("condapipe.recipes", "condapipe.patches"),
    "fix": (),
    "verify": (),
}
# The family registry and profiles (recipes/families.yaml, recipes/<family>/family.yaml) are taken
# the same way, by the file names the reached code names: fix reads their rpath rules, verify their
# package names and arch defaults, and neither the templates or sources beside them.
RECIPES_PACKAGE = "condapipe.recipes"


def tree_digest(root: Path, *, patterns: tuple[str, ...] = ("*",)) -> str:
    """sha256 over the relative paths and contents of every file under root (sorted: stable)."""
    digest = hashlib.sha256()
    if root.is_file():
        digest.update(root.read_bytes())
        return digest.hexdigest()
    if not root.exists():
        return "absent"
    files = sorted({p for pat in patterns for p in root.rglob(pat) if p.is_file()})
    for path in files:
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or any(part.startswith(".") for part in rel.parts):
            continue
        digest.update(str(rel).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def module_file(module: str, root: Path = PACKAGE_DIR) -> Path | None:
    """The source file of a condapipe module under `root`, or None when it is not a module."""
    base = root.joinpath(*module.split(".")[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache  # keyed by the source text: a plan asks once per job, and parsing is the slow part
def _imports(source: str, module: str, is_package: bool) -> tuple[frozenset[str], bool]:
    """Names a module imports from condapipe (modules, or `module.name` candidates), and whether it
    loads submodules by name (importlib.import_module)."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] == PACKAGE:
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)  # kept only if a module
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            dynamic = dynamic or name == "import_module"
    return frozenset(found), dynamic


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def reached_modules(entries: Iterable[str], root: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every condapipe module the entry modules reach, transitively: module name -> source file."""
    seen: dict[str, Path] = {}
    todo = [m for entry in entries for m in _with_parents(entry)]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        path = module_file(module, root)
        if path is None:
            continue  # `from condapipe.x import name` where name is not a module
        seen[module] = path
        names, dynamic = _imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
        for name in names:
            todo.extend(_with_parents(name))
        if dynamic:
            package_dir = path.parent
            prefix = module if path.name == "__init__.py" else module.rpartition(".")[0]
            for sub in package_dir.rglob("*.py"):
                rel = sub.relative_to(package_dir).with_suffix("").parts
                rel = rel[:-1] if rel[-1] == "__init__" else rel
                todo.append(".".join((prefix, *rel)))
    return seen


def _resource_dir(package: str, root: Path) -> Path:
    """A data package's folder: inside `root` when it is there (an installed tree), else wherever
    the package lives (an editable install maps condapipe.recipes to the repository's recipes/)."""
    inside = root.joinpath(*package.split(".")[1:])
    return inside if inside.is_dir() else Path(str(resources.files(package)))


@cache
def _string_constants(source: str) -> frozenset[str]:
    return frozenset(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def tables_named(modules: dict[str, Path], root: Path = PACKAGE_DIR) -> list[Path]:
    """The data tables (files of condapipe/data) that the source of `modules` names."""
    data_dir = _resource_dir(DATA_PACKAGE, root)
    tables = {p.name: p for p in data_dir.iterdir() if p.is_file() and not p.name.startswith((".", "_"))}
    named: set[str] = set()
    for path in modules.values():
        named |= _string_constants(path.read_text(encoding="utf-8")) & tables.keys()
    return [tables[name] for name in sorted(named)]


def profiles_named(modules: dict[str, Path], root: Path = PACKAGE_DIR) -> list[Path]:
    """The files of condapipe/recipes, at any depth, whose names the source of `modules` names
    ("families.yaml", "family.yaml": the family registry and profiles)."""
    recipes = _resource_dir(RECIPES_PACKAGE, root)
    named: set[str] = set()
    for path in modules.values():
        named |= _string_constants(path.read_text(encoding="utf-8"))
    return sorted(p for p in recipes.rglob("*.yaml") if p.is_file() and p.name in named)


def code_digest(kind: str, root: Path = PACKAGE_DIR) -> str:
    """Digest of the code and data a step kind runs (see the module docstring); "" for other kinds."""
    if kind not in ENTRY_MODULES:
        return ""
    digest = hashlib.sha256()
    modules = reached_modules(ENTRY_MODULES[kind], root)
    for module, path in sorted(modules.items()):
        digest.update(f"{module}={hashlib.sha256(path.read_bytes()).hexdigest()};".encode())
    for table in tables_named(modules, root):
        digest.update(f"data/{table.name}={hashlib.sha256(table.read_bytes()).hexdigest()};".encode())
    recipes = _resource_dir(RECIPES_PACKAGE, root)
    for profile in profiles_named(modules, root):
        rel = profile.relative_to(recipes).as_posix()
        digest.update(f"recipes/{rel}={hashlib.sha256(profile.read_bytes()).hexdigest()};".encode())
    for package in RESOURCES[kind]:
        digest.update(f"{package}={tree_digest(_resource_dir(package, root))};".encode())
    return digest.hexdigest()

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

The step's own body counts too: the plan's `<kind>_action` in condapipe.plan.steps (what it does
with the stage's result: which packages it hands on, the repack level, the libraries verify
allows) and the functions of that module it calls, by their source text, with the imports inside
them followed as above. The plan's scheduling interface (StepContext, StepOutcome, imported at
the top of that module) is what calls a step, not what it runs, and is not followed.
"""

from __future__ import annotations

import ast
import dis
import hashlib
import importlib.machinery
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from types import CodeType
from typing import Any

PACKAGE = "condapipe"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the directory of condapipe/__init__.py

# step kind -> the module that implements it (what condapipe.plan.steps calls for that kind).
ENTRY_MODULES: dict[str, tuple[str, ...]] = {
    "render": ("condapipe.render.recipe_dir",),
    "fix": ("condapipe.fix.fixer",),
    "verify": ("condapipe.verify.verifier",),
}
# The module that holds each step kind's body, `<kind>_action` (what condapipe.plan.build_plan
# gives the runner); the body's source and the helpers it calls are part of the step's code.
STEP_BODIES = "condapipe.plan.steps"
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


@dataclass(frozen=True)
class _SourceFacts:
    """What the digest needs from one module's source, from one parse."""

    imports: frozenset[str]  # names it imports from condapipe (modules, or `module.name` candidates)
    dynamic: bool  # it loads submodules by name (importlib.import_module)
    strings: frozenset[str]  # its string constants (data table and profile file names)


def _statements(tree: ast.Module) -> Iterator[ast.AST]:
    """Every statement at any depth (function and class bodies, branches, handlers, match cases),
    without descending into expressions: an import is always a statement."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        todo.extend(
            child
            for child in ast.iter_child_nodes(node)
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
        )


def _import_names(node: ast.AST, package: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: resolve against this module's package
            anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{anchor}.{base}" if base else anchor
        if base.split(".")[0] == PACKAGE:
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)  # kept only if a module


def _constants(code: CodeType) -> Iterator[object]:
    """The constants of a code object and of the functions and classes in it, tuples flattened."""
    todo: list[object] = list(code.co_consts)
    while todo:
        item = todo.pop()
        if isinstance(item, CodeType):
            todo.extend(item.co_consts)
        elif isinstance(item, tuple | frozenset):
            todo.extend(item)
        else:
            yield item


def _code_objects(code: CodeType) -> Iterator[CodeType]:
    """A module's code object and those of the functions, classes and comprehensions in it."""
    todo = [code]
    while todo:
        item = todo.pop()
        yield item
        todo.extend(c for c in item.co_consts if isinstance(c, CodeType))


_IMPORT_NAME = dis.opmap["IMPORT_NAME"]
_NO_VALUE = object()


def _bytecode_imports(code: CodeType) -> list[tuple[int, str, tuple[str, ...]]] | None:
    """(level, module, imported names) of every import in the code, read from IMPORT_NAME and the
    two constants before it (level, from-list); None when one does not have that shape."""
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for item in _code_objects(code):
        if _IMPORT_NAME not in item.co_code[::2]:  # opcodes sit at even offsets
            continue
        previous: list[object] = [_NO_VALUE, _NO_VALUE]
        for ins in dis.get_instructions(item):
            if ins.opname == "EXTENDED_ARG":
                continue
            if ins.opname == "IMPORT_NAME":
                level, names = previous
                if not isinstance(level, int) or not (names is None or isinstance(names, tuple)):
                    return None
                found.append((level, str(ins.argval), tuple(str(n) for n in names or ())))
            constant = ins.opname in ("LOAD_CONST", "LOAD_SMALL_INT")
            previous = [previous[1], ins.argval if constant else _NO_VALUE]
    return found


class _CachedBytecode(importlib.machinery.SourceFileLoader):
    """Loads a module's code as `import` does (its __pycache__ file when that is current, else the
    source compiled), without importing it and without writing a cache file."""

    def set_data(self, path: str, data: object, *, _mode: int = 0o666) -> None:
        return None


def _resolved(level: int, name: str, package: str) -> str:
    if not level:
        return name
    anchor = package.rsplit(".", level - 1)[0] if level > 1 else package
    return f"{anchor}.{name}" if name else anchor


def _condapipe_names(imports: list[tuple[int, str, tuple[str, ...]]], package: str) -> frozenset[str]:
    """The condapipe modules (or `module.name` candidates) among decoded imports."""
    found: set[str] = set()
    for level, name, names in imports:
        base = _resolved(level, name, package)
        if base.split(".")[0] == PACKAGE:
            found.add(base)
            found.update(f"{base}.{n}" for n in names)  # kept only if a module
    return frozenset(found)


def _parsed_imports(source: str, package: str) -> frozenset[str]:
    """The same names read from the syntax tree (slower): for code whose imports the bytecode
    reading does not recognise."""
    tree = ast.parse(source)
    return frozenset(name for node in _statements(tree) for name in _import_names(node, package))


@cache  # keyed by path and source text: fix and verify reach mostly the same modules
def _source_facts(path: Path, source: str, module: str) -> _SourceFacts:
    """From the module's code object (what import loads; no syntax tree is built: parsing costs
    several times more than loading cached bytecode): the import statements, the string
    constants, and whether it calls import_module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    try:
        code = _CachedBytecode(module, str(path)).get_code(module)
    except (ImportError, SyntaxError, ValueError):
        code = None
    if code is None:  # not loadable as a module: compile the text read
        code = compile(source, str(path), "exec", dont_inherit=True)
    imports = _bytecode_imports(code)
    found = _parsed_imports(source, package) if imports is None else _condapipe_names(imports, package)
    strings = frozenset(c for c in _constants(code) if isinstance(c, str))
    dynamic = any("import_module" in item.co_names for item in _code_objects(code))
    return _SourceFacts(found, dynamic, strings)


def _facts(module: str, path: Path) -> _SourceFacts:
    return _source_facts(path, path.read_text(encoding="utf-8"), module)


@dataclass(frozen=True)
class StepBody:
    """A step kind's body: the source of `<kind>_action` and of every function or class of its
    module that it names (transitively), and the condapipe names imported inside them."""

    sources: tuple[tuple[str, str], ...]  # (name, source text), sorted by name
    imports: frozenset[str]


@dataclass(frozen=True)
class _Definition:
    source: str  # its text, whole lines
    names: frozenset[str]  # the names it uses
    imports: frozenset[str]  # condapipe names imported inside it


@cache  # keyed by path and source text, like _source_facts: one parse for every step kind
def _definitions(path: Path, source: str, module: str) -> dict[str, _Definition]:
    """The top-level functions and classes of a module, read from its syntax tree."""
    lines = source.splitlines(keepends=True)
    package = module.rpartition(".")[0]
    found: dict[str, _Definition] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        names: set[str] = set()
        imports: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
            elif isinstance(sub, ast.Import | ast.ImportFrom):
                imports.update(_import_names(sub, package))
        text = "".join(lines[node.lineno - 1 : node.end_lineno])
        found[node.name] = _Definition(text, frozenset(names), frozenset(imports))
    return found


def _step_body(path: Path, source: str, module: str, function: str) -> StepBody:
    """The named function and what it calls by name: editing another step's body (or a comment
    between functions) changes nothing here."""
    definitions = _definitions(path, source, module)
    if function not in definitions:
        raise ValueError(f"{path}: no step body {function}")
    found: set[str] = set()
    todo = [function]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(definitions[name].names & definitions.keys())
    return StepBody(
        tuple((name, definitions[name].source) for name in sorted(found)),
        frozenset().union(*(definitions[name].imports for name in found)),
    )


def step_body(kind: str, root: Path = PACKAGE_DIR) -> StepBody:
    """The body of a step kind, read from `root`'s copy of condapipe.plan.steps."""
    path = module_file(STEP_BODIES, root)
    if path is None:
        raise ValueError(f"{STEP_BODIES} not found under {root}")
    return _step_body(path, path.read_text(encoding="utf-8"), STEP_BODIES, f"{kind}_action")


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
        facts = _facts(module, path)
        for name in facts.imports:
            todo.extend(_with_parents(name))
        if facts.dynamic:
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


def tables_named(modules: dict[str, Path], root: Path = PACKAGE_DIR) -> list[Path]:
    """The data tables (files of condapipe/data) that the source of `modules` names."""
    data_dir = _resource_dir(DATA_PACKAGE, root)
    tables = {p.name: p for p in data_dir.iterdir() if p.is_file() and not p.name.startswith((".", "_"))}
    named: set[str] = set()
    for module, path in modules.items():
        named |= _facts(module, path).strings & tables.keys()
    return [tables[name] for name in sorted(named)]


def profiles_named(modules: dict[str, Path], root: Path = PACKAGE_DIR) -> list[Path]:
    """The files of condapipe/recipes, at any depth, whose names the source of `modules` names
    ("families.yaml", "family.yaml": the family registry and profiles)."""
    recipes = _resource_dir(RECIPES_PACKAGE, root)
    named: set[str] = set()
    for module, path in modules.items():
        named |= _facts(module, path).strings
    return sorted(p for p in recipes.rglob("*.yaml") if p.is_file() and p.name in named)


def code_digest(kind: str, root: Path = PACKAGE_DIR) -> str:
    """Digest of the code and data a step kind runs, its body included (see the module docstring);
    "" for other kinds."""
    if kind not in ENTRY_MODULES:
        return ""
    digest = hashlib.sha256()
    body = step_body(kind, root)
    for name, text in body.sources:
        digest.update(f"{STEP_BODIES}.{name}={hashlib.sha256(text.encode()).hexdigest()};".encode())
    modules = reached_modules((*ENTRY_MODULES[kind], *sorted(body.imports)), root)
    _add_modules(digest, modules, root)
    for package in RESOURCES[kind]:
        digest.update(f"{package}={tree_digest(_resource_dir(package, root))};".encode())
    return digest.hexdigest()


def _add_modules(digest: Any, modules: dict[str, Path], root: Path) -> None:
    """The source of `modules`, with the data tables and family files they name, into `digest`."""
    for module, path in sorted(modules.items()):
        digest.update(f"{module}={hashlib.sha256(path.read_bytes()).hexdigest()};".encode())
    for table in tables_named(modules, root):
        digest.update(f"data/{table.name}={hashlib.sha256(table.read_bytes()).hexdigest()};".encode())
    recipes = _resource_dir(RECIPES_PACKAGE, root)
    for profile in profiles_named(modules, root):
        rel = profile.relative_to(recipes).as_posix()
        digest.update(f"recipes/{rel}={hashlib.sha256(profile.read_bytes()).hexdigest()};".encode())


# What the staged fix runs: which files it fixes and moves (fix.staged, fix.stage_out) and the
# per-file check and write it shares with the fix step (fix.fixer, reached from both).
STAGED_FIX_ENTRIES = ("condapipe.fix.stage_out",)


@cache
def staged_fix_digest(root: Path = PACKAGE_DIR) -> str:
    """Digest of the code and data the staged fix runs (which files it fixes, its rules, how it
    checks and writes one), read as code_digest reads a step's: the staged fix records it with what
    it fixed, and the fix step trusts that record only when its own copy of that code is the same
    (a build is not redone for a code change; the fix step then checks every file again)."""
    digest = hashlib.sha256()
    _add_modules(digest, reached_modules(STAGED_FIX_ENTRIES, root), root)
    return digest.hexdigest()

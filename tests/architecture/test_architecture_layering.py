"""The package's layering (docs/design.md, README "Architecture"): no import circles, no stage imports
the CLI, and every import between stages goes down the data flow.

Every module under pipeline/condapipe is read with ast (nothing is imported). All imports count:
module level, inside functions (a lazy import that hides a circle is still a circle) and under
`if TYPE_CHECKING:`. `from condapipe.x import y` is an edge to the module condapipe.x.y when y is
a module, else to condapipe.x (its `__init__`).
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "pipeline" / "condapipe"

# Lowest first; a stage may import its own modules and those of stages before it, never after.
# Modules at the package root (errors, yaml_io, hashing, the data package) come before every stage,
# then the shared libraries (ELF reading, conda package files, the facts: tables, arch lists, family
# registry) that several stages use.
SHARED_LIBRARIES = ("elf", "package", "facts")
STAGE_ORDER = (
    "root",
    *SHARED_LIBRARIES,
    "buildspec",
    "inputchannels",
    "render",
    "engines",
    "fix",
    "verify",
    "publish",
    "doctor",
    "plan",
    "cli",
)
RANK = {stage: i for i, stage in enumerate(STAGE_ORDER)}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py")) if "__pycache__" not in p.parts}


def stage_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else "root"


def imports_of(module: str) -> set[str]:
    """The condapipe modules `module` imports, anywhere in its source."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] != "condapipe":
                continue
            while name not in MODULES:  # `import condapipe.x.y` where y is not a module
                name = name.rpartition(".")[0]
            if name != module:
                found.add(name)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_reader_sees_the_whole_package() -> None:
    assert {"condapipe.errors", "condapipe.cli.main", "condapipe.plan.runner"} <= set(MODULES)
    assert {stage_of(m) for m in MODULES} == set(STAGE_ORDER)
    # Function-level imports are edges too (the plan's step bodies load stages lazily).
    assert "condapipe.fix.fixer" in GRAPH["condapipe.plan.steps"]


def test_no_module_import_circles() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import circle: " + " -> ".join(cycle or ())


def test_no_stage_import_circles() -> None:
    stages: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        stages[stage_of(module)].update(stage_of(t) for t in targets if stage_of(t) != stage_of(module))
    cycle = find_cycle(stages)
    assert cycle is None, "stage circle: " + " -> ".join(cycle or ())


def test_only_the_cli_imports_the_cli() -> None:
    offenders = sorted(
        f"{m} imports {t}"
        for m, targets in GRAPH.items()
        if stage_of(m) != "cli"
        for t in targets
        if stage_of(t) == "cli"
    )
    assert not offenders, "stages report through callbacks or a console passed in: " + "; ".join(offenders)


def test_every_stage_import_goes_down_the_documented_order() -> None:
    upward = sorted(
        f"{m} ({stage_of(m)}) imports {t} ({stage_of(t)})"
        for m, targets in GRAPH.items()
        for t in targets
        if RANK[stage_of(t)] > RANK[stage_of(m)]
    )
    assert not upward, "order " + " < ".join(STAGE_ORDER) + ": " + "; ".join(upward)


def test_fix_is_a_stage_not_a_library() -> None:
    # Only what runs the fixing stage (the plan's fix step, the `fix` command) imports fix/; verify
    # and publish read packages and ELF files through the shared libraries.
    users = sorted(
        f"{m} imports {t}"
        for m, targets in GRAPH.items()
        if stage_of(m) not in ("fix", "plan", "cli")
        for t in targets
        if stage_of(t) == "fix"
    )
    assert not users, "; ".join(users)


def test_the_cycle_finder_finds_circles_hidden_in_functions() -> None:
    # The checks above pass on a clean tree; this shows they would fail on a circle.
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


STAGE_PACKAGES = [f"condapipe.{s}" for s in STAGE_ORDER if s not in ("root", *SHARED_LIBRARIES)]


@pytest.mark.parametrize("package", STAGE_PACKAGES)
def test_each_stage_names_its_few_public_entry_points(package: str) -> None:
    module = importlib.import_module(package)
    public = getattr(module, "__all__", None)
    assert public, f"{package}/__init__.py lists its entry points in __all__"
    assert len(public) <= 30 and len(set(public)) == len(public)
    missing = [name for name in public if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not provide: {missing}"


def test_nothing_below_the_cli_parses_flags_or_prints() -> None:
    # Flags are defined once, in cli/; stages return values or report through callbacks.
    offenders: list[str] = []
    for module, path in MODULES.items():
        if stage_of(module) == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                offenders += [f"{module} imports {n}" for n in names if n.split(".")[0] == "click"]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{module} calls print()")
    assert not offenders, offenders

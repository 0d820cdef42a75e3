"""A code change reruns exactly the steps whose code changed.

The fix, verify and render steps hash the condapipe code they run, found by following the real
imports from the module that implements each step (condapipe.plan.code_inputs). So a changed
ELF reader re-fixes and re-verifies finished packages, while a changed CLI leaves multi-hour
builds alone. The tests edit a copy of the package, never the package itself.
"""

from __future__ import annotations

import ast
import shutil
from importlib import resources
from pathlib import Path

import pytest

from condapipe.plan import code_inputs
from condapipe.plan.code_inputs import ENTRY_MODULES, PACKAGE_DIR, code_digest, reached_modules

KINDS = ("render", "fix", "verify")


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of pipeline/condapipe, with the recipe templates and patches inside (as installed)."""
    root = tmp_path / "condapipe"
    shutil.copytree(PACKAGE_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("recipes", "patches"):
        shutil.copytree(Path(str(resources.files(f"condapipe.{data}"))), root / data)
    return root


def digests(root: Path) -> dict[str, str]:
    return {kind: code_digest(kind, root) for kind in KINDS}


def edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# changed\n")


def test_a_copy_of_the_package_has_the_same_code_digests(package_copy: Path) -> None:
    assert digests(package_copy) == digests(PACKAGE_DIR)
    assert len(set(digests(PACKAGE_DIR).values())) == 3


@pytest.mark.parametrize("module", ["elf/reader.py", "elf/scan.py", "package/io.py", "errors.py"])
def test_a_change_to_a_shared_library_refixes_and_reverifies(package_copy: Path, module: str) -> None:
    before = digests(package_copy)
    edit(package_copy / module)
    after = digests(package_copy)
    assert after["fix"] != before["fix"] and after["verify"] != before["verify"]


@pytest.mark.parametrize("module", ["fix/rpath.py", "fix/patchers.py", "fix/fixer.py"])
def test_a_change_to_the_fixer_refixes_but_does_not_reverify(package_copy: Path, module: str) -> None:
    # verify reads packages and ELF files through the shared libraries, never through fix/.
    before = digests(package_copy)
    edit(package_copy / module)
    after = digests(package_copy)
    assert after["fix"] != before["fix"] and after["verify"] == before["verify"]


@pytest.mark.parametrize(
    "module",
    [
        "buildspec/settings.py",
        "buildspec/config_file.py",
        "buildspec/compile_cache.py",
        "buildspec/defaults.py",
        "buildspec/build_spec.py",
        "buildspec/__init__.py",
    ],
)
def test_a_change_to_the_settings_code_refixes_and_reverifies_nothing(
    package_copy: Path, module: str
) -> None:
    # Fix and verify read facts (the family registry, rpath rules, promised archs) from the facts
    # library, which imports no settings: a new flag or config key leaves finished packages alone.
    before = digests(package_copy)
    edit(package_copy / module)
    after = digests(package_copy)
    assert after["fix"] == before["fix"] and after["verify"] == before["verify"]
    assert after["render"] != before["render"]  # render reads the spec, so the same edit re-renders


@pytest.mark.parametrize(
    ("module", "refix", "reverify"),
    [("facts/families.py", True, True), ("facts/tables.py", True, True), ("facts/promise.py", False, True)],
)
def test_a_change_to_a_fact_reruns_the_steps_that_read_it(
    package_copy: Path, module: str, refix: bool, reverify: bool
) -> None:
    before = digests(package_copy)
    edit(package_copy / module)
    after = digests(package_copy)
    assert (after["fix"] != before["fix"], after["verify"] != before["verify"]) == (refix, reverify)


def edit_function(module: Path, name: str) -> None:
    """Add a statement at the top of one top-level function's body."""
    lines = module.read_text().splitlines(keepends=True)
    (node,) = [n for n in ast.parse("".join(lines)).body if isinstance(n, ast.FunctionDef) and n.name == name]
    first = node.body[0]
    lines.insert(first.lineno - 1, " " * first.col_offset + "changed = True\n")
    module.write_text("".join(lines))


@pytest.mark.parametrize(
    ("function", "rerun"),
    [
        ("fix_action", {"fix"}),
        ("final_compression", {"fix"}),
        ("verify_action", {"verify"}),
        ("local_dependency_libs", {"verify"}),
        ("render_action", {"render"}),
        ("_packages", {"fix", "verify"}),
        ("build_action", set()),
        ("test_action", set()),
        ("publish_action", set()),
    ],
)
def test_a_change_to_a_step_body_reruns_that_step_only(package_copy: Path, function: str, rerun: set) -> None:
    # The plan's <kind>_action and the helpers it calls are code the step runs: a changed fix body
    # (which packages it hands on, the repack level) re-fixes; another step's body changes nothing.
    before = digests(package_copy)
    edit_function(package_copy / "plan" / "steps.py", function)
    after = digests(package_copy)
    assert {kind for kind in KINDS if after[kind] != before[kind]} == rerun


def test_text_between_the_step_bodies_reruns_nothing(package_copy: Path) -> None:
    before = digests(package_copy)
    edit(package_copy / "plan" / "steps.py")  # a comment at the end of the module
    assert digests(package_copy) == before


def test_a_change_to_the_verifier_reverifies_but_does_not_refix(package_copy: Path) -> None:
    before = digests(package_copy)
    edit(package_copy / "verify" / "verifier.py")
    after = digests(package_copy)
    assert after["verify"] != before["verify"]
    assert after["fix"] == before["fix"] and after["render"] == before["render"]


@pytest.mark.parametrize("path", ["cli/main.py", "cli/commands/fix.py", "plan/report.py", "doctor/checks.py"])
def test_a_change_outside_the_steps_code_reruns_nothing(package_copy: Path, path: str) -> None:
    before = digests(package_copy)
    edit(package_copy / path)
    assert digests(package_copy) == before


def test_a_change_to_a_family_loaded_by_name_rerenders(package_copy: Path) -> None:
    # render.families loads its family modules with importlib, not with an import statement.
    before = digests(package_copy)
    edit(package_copy / "render" / "families" / "magma.py")
    after = digests(package_copy)
    assert after["render"] != before["render"]
    assert after["fix"] == before["fix"]


@pytest.mark.parametrize("data", ["data/cuda.yaml", "recipes/pytorch/build.sh.j2", "patches/index.yaml"])
def test_a_changed_table_template_or_patch_rerenders(package_copy: Path, data: str) -> None:
    before = digests(package_copy)
    edit(package_copy / data)
    assert digests(package_copy)["render"] != before["render"]


def test_a_changed_rpath_table_refixes_only(package_copy: Path) -> None:
    before = digests(package_copy)
    edit(package_copy / "data" / "rpath_rules.yaml")
    after = digests(package_copy)
    assert after["fix"] != before["fix"]
    assert after["verify"] == before["verify"] and after["render"] == before["render"]


def test_a_changed_linkage_table_reverifies_only(package_copy: Path) -> None:
    before = digests(package_copy)
    edit(package_copy / "data" / "linkage.yaml")
    after = digests(package_copy)
    assert after["verify"] != before["verify"]
    assert after["fix"] == before["fix"] and after["render"] == before["render"]


@pytest.mark.parametrize(
    "path", ["data/doctor.yaml", "data/diagnoses.yaml", "cli/flags.py", "cli/commands/build.py"]
)
def test_doctor_data_and_help_text_rerun_no_step(package_copy: Path, path: str) -> None:
    # A resumed multi-hour build must not re-render, re-fix or re-verify for a doctor table or a
    # flag's help text: neither is code a step runs.
    before = digests(package_copy)
    edit(package_copy / path)
    assert digests(package_copy) == before


def test_every_data_table_is_named_by_the_code_that_reads_it() -> None:
    # Tables are taken per file by name; a table loaded under a computed name would be missed.
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE_DIR.rglob("*.py"))
    tables = [p.name for p in (PACKAGE_DIR / "data").glob("*.yaml")]
    assert tables and all(f'"{name}"' in source for name in tables)


def test_imports_inside_functions_are_followed(tmp_path: Path) -> None:
    root = tmp_path / "condapipe"
    (root / "fix").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "fix" / "__init__.py").write_text("")
    (root / "fix" / "fixer.py").write_text("def run():\n    from condapipe.fix import helper\n")
    (root / "fix" / "helper.py").write_text("import condapipe.errors\n")
    (root / "errors.py").write_text("")
    (root / "cli.py").write_text("")
    reached = reached_modules(["condapipe.fix.fixer"], root)
    assert sorted(reached) == [
        "condapipe",
        "condapipe.errors",
        "condapipe.fix",
        "condapipe.fix.fixer",
        "condapipe.fix.helper",
    ]


def test_nothing_the_fixer_reaches_belongs_to_the_plan_or_the_cli() -> None:
    reached = reached_modules(ENTRY_MODULES["fix"])
    assert "condapipe.elf.reader" in reached and "condapipe.fix.rpath" in reached
    assert not [m for m in reached if m.startswith(("condapipe.cli", "condapipe.plan"))]


def test_each_entry_module_is_what_the_step_body_runs() -> None:
    """The entry modules are the ones condapipe.plan.steps imports for that step kind."""
    tree = ast.parse((PACKAGE_DIR / "plan" / "steps.py").read_text())
    bodies = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for kind in KINDS:
        imported = {
            node.module for node in ast.walk(bodies[f"{kind}_action"]) if isinstance(node, ast.ImportFrom)
        }
        assert set(ENTRY_MODULES[kind]) <= imported, kind
    assert set(code_inputs.RESOURCES) == set(ENTRY_MODULES)

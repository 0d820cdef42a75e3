"""The source tree reads as source to git and to path-based tools.

A folder called `build/` is ignored by the usual `.gitignore` line and read as build output by path
tools; `spec/` and `tests/` are read as test folders. Stage folders avoid those names, and no
tracked source under pipeline/ may be matched by .gitignore (a new module there would be invisible
to `git status`, and `git add` would refuse it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO / "pipeline" / "condapipe"

# Folder names tools take for build output or tests rather than source.
NOT_SOURCE_NAMES = {
    "build",
    "dist",
    "out",
    "target",
    "test",
    "tests",
    "testing",
    "spec",
    "specs",
    "__tests__",
}

needs_git = pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout"
)


def ignored_by_git(paths: list[str]) -> list[str]:
    """The repository-relative paths .gitignore matches (tracked or not)."""
    return subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=REPO,
        input="\n".join(paths),
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()


def test_no_package_folder_is_named_like_build_output_or_tests() -> None:
    folders = [p for p in PACKAGE_DIR.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    offenders = sorted(str(p.relative_to(REPO)) for p in folders if p.name in NOT_SOURCE_NAMES)
    assert not offenders, offenders


@needs_git
def test_no_source_file_under_pipeline_is_ignored_by_git() -> None:
    sources = [str(p.relative_to(REPO)) for p in PACKAGE_DIR.rglob("*") if p.is_file()]
    sources = [s for s in sources if "__pycache__" not in s and not s.endswith(".pyc")]
    assert sources
    ignored = ignored_by_git(sources)
    assert not ignored, f".gitignore matches source files: {ignored}"


@needs_git
def test_a_new_module_in_any_stage_folder_would_be_seen_by_git() -> None:
    # The check above covers today's files; a module added tomorrow must not be ignored either.
    stage_dirs = [p for p in PACKAGE_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"]
    names = [str((d / "new_module.py").relative_to(REPO)) for d in stage_dirs]
    ignored = ignored_by_git(names)
    assert not ignored, ignored


def test_every_stage_and_library_folder_has_its_tests_folder() -> None:
    # tests/ mirrors the code (docs/design.md "Tests mirror the stages"): a folder's tests are found
    # where its name says, and a new stage or library comes with its own.
    folders = sorted(
        p.name
        for p in PACKAGE_DIR.iterdir()
        if p.is_dir() and (p / "__init__.py").is_file() and p.name != "data"
    )
    assert {"elf", "package", "facts", "inputchannels", "plan"} <= set(folders)
    missing = [name for name in folders if not any((REPO / "tests" / name).glob("test_*.py"))]
    assert not missing, f"no tests/<folder>/test_*.py for: {missing}"

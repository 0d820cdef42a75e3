"""The environment is read in the settings cascade and at the engines' process boundary.

The cascade (buildspec/settings.py with its ENVIRONMENT table, the compile cache it decides, and
cli/flags.py, which hands it this process's environment) turns CONDAPIPE_* variables into Settings;
the engines and the child processes the plan starts (package tests, smoke checks) pass the
environment on to what they run. The modules listed as NOT_YET still read a variable themselves;
the list may only shrink. Sources are read with ast (nothing is imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

from condapipe.buildspec.settings import ENVIRONMENT, Settings

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "pipeline" / "condapipe"

# settings.py itself takes the environment as a parameter: cli/flags.py passes this process's.
CASCADE = {"buildspec/compile_cache.py", "cli/flags.py"}
PROCESS_BOUNDARY = {
    "engines/conda_build.py",  # conda-build's environment: this one plus the build's
    "engines/rattler_build.py",  # the py-rattler-build child's
    "engines/conda_build_site/sitecustomize.py",  # runs inside conda-build, reads what condapipe set
    "plan/steps.py",  # PATH for the staged-fix launcher in the build's environment
    "plan/smoke_check.py",  # the smoke check's child, without the caller's LD_LIBRARY_PATH/PYTHON*
    "plan/conda_build_tests.py",  # a recipe's test commands get conda-build's variables on top
}
NOT_YET = {
    "cli/commands/build.py",  # the compile cache: sccache credentials stay in the environment
    "cli/family_build.py",  # the same, for the cache several Pythons share
    "doctor/machine.py",  # Machine.from_environ: the PATH and overrides of the machine checked
    "facts/native.py",  # CONDAPIPE_NVIDIA_SMI for --arch native
    "package/safe_extract.py",  # the unpack limits
    "plan/progress.py",  # how often progress is redrawn
    "plan/runner.py",  # the test hooks that pause a plan
    "publish/tokens.py",  # anaconda-client's token variables and config
    "safe_paths.py",  # HOME for ~ in paths
}


def reads_environment(source: str) -> bool:
    """Whether `source` reads os.environ or calls os.getenv (a mention in a string does not count)."""
    return any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
        and node.attr in ("environ", "getenv", "environb")
        for node in ast.walk(ast.parse(source))
    )


def test_the_scan_sees_a_read_and_not_a_mention() -> None:
    assert reads_environment("import os\nx = os.environ.get('A')")
    assert reads_environment("import os\nx = os.getenv('A')")
    assert not reads_environment("'read os.environ here'")


def test_the_environment_is_read_only_where_the_design_says() -> None:
    readers = {
        p.relative_to(PACKAGE_DIR).as_posix()
        for p in PACKAGE_DIR.rglob("*.py")
        if "__pycache__" not in p.parts and reads_environment(p.read_text(encoding="utf-8"))
    }
    assert readers == CASCADE | PROCESS_BOUNDARY | NOT_YET


def test_each_variable_of_the_cascade_is_declared_with_the_setting_it_fills() -> None:
    fields = {f for f in Settings.__dataclass_fields__}
    assert [e.name for e in ENVIRONMENT] == [
        "CONDAPIPE_COMPILE_CACHE",
        "CONDAPIPE_CHANNEL_TIMEOUT",
        "CONDAPIPE_UPLOAD_TIMEOUT",
    ]
    assert all(e.field in fields and e.what for e in ENVIRONMENT)

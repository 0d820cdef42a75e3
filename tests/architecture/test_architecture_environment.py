"""The environment is read in the settings cascade and at the engines' process boundary.

The cascade (buildspec/settings.py with its ENVIRONMENT table, and cli/flags.py, which hands it this
command's environment) turns variables into Settings, which keeps the environment whole for what a
stage reads from it (doctor's machine, the upload token, the user's compile cache); the root command
(cli/main.py) hands this process's environment to condapipe.process_settings once, for what the
libraries below the settings share (unpack limits, nvidia-smi, progress cadence, test hooks). The
engines and the child processes the plan starts (package tests, smoke checks) pass the environment
on to what they run. Nothing else reads it. Sources are read with ast (nothing is imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

from condapipe.buildspec.settings import ENVIRONMENT, Settings, resolve_settings
from condapipe.process_settings import ProcessSettings

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "pipeline" / "condapipe"

# settings.py and process_settings.py take the environment as a parameter: these hand it over.
CASCADE = {"cli/flags.py", "cli/main.py"}
PROCESS_BOUNDARY = {
    "engines/conda_build.py",  # conda-build's environment: this one plus the build's
    "engines/rattler_build.py",  # the py-rattler-build child's
    "engines/conda_build_site/sitecustomize.py",  # runs inside conda-build, reads what condapipe set
    "plan/steps.py",  # PATH for the staged-fix launcher in the build's environment
    "plan/smoke_check.py",  # the smoke check's child, without the caller's LD_LIBRARY_PATH/PYTHON*
    "plan/conda_build_tests.py",  # a recipe's test commands get conda-build's variables on top
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
    assert readers == CASCADE | PROCESS_BOUNDARY


def test_each_variable_is_declared_once_with_the_setting_it_fills() -> None:
    fields = set(Settings.__dataclass_fields__) | set(ProcessSettings.__dataclass_fields__)
    names = [e.name for e in ENVIRONMENT]
    assert len(names) == len(set(names))
    assert {
        "CONDAPIPE_COMPILE_CACHE",
        "CONDAPIPE_CHANNEL_TIMEOUT",
        "CONDAPIPE_UPLOAD_TIMEOUT",
        "ANACONDA_API_TOKEN",
        "BINSTAR_API_TOKEN",
        "CONDAPIPE_NVIDIA_SMI",
        "CONDAPIPE_MAX_UNPACK_BYTES",
        "CONDAPIPE_MAX_UNPACK_FILES",
        "CONDAPIPE_MAX_UNPACK_RATIO",
        "CONDAPIPE_PROGRESS_EVERY",
        "CONDAPIPE_TEST_PAUSE",
        "CONDAPIPE_TEST_PAUSE_FILE",
        "CONDAPIPE_MEMINFO",
        "CONDAPIPE_MACHINE_ARCH",
        "CONDAPIPE_DRIVER_VERSION_FILE",
        "CONDAPIPE_CUDA_ROOTS",
    } == set(names)
    assert all(e.field in fields and e.what for e in ENVIRONMENT)


# What condapipe sets for the programs it starts (never reads back): the recipe's staged fix switch,
# conda-build's zstd threads, the pip requirement a generated CI workflow installs.
SET_FOR_CHILDREN = {"CONDAPIPE_STAGED_FIX", "CONDAPIPE_ZSTD_THREADS", "CONDAPIPE_REQUIREMENT"}


def test_every_condapipe_variable_the_code_names_is_in_the_table_or_set_for_a_child() -> None:
    named = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and text.startswith("CONDAPIPE_") and text.isidentifier():
                named.add(text)
    assert named - SET_FOR_CHILDREN == {e.name for e in ENVIRONMENT if e.name.startswith("CONDAPIPE_")}


def test_the_upload_token_is_in_no_printed_form_of_the_settings() -> None:
    secret = "tok-3f9a1c77e2b04d5e"
    settings = resolve_settings(
        "cuda-smoke", {}, environ={"ANACONDA_API_TOKEN": secret, "BINSTAR_API_TOKEN": secret}, config={}
    )
    assert settings.environ["ANACONDA_API_TOKEN"] == secret  # the upload command reads it here
    assert secret not in repr(settings)
    assert secret not in str(settings.to_dict())
    assert secret not in repr(settings.for_package("magma-cuda"))

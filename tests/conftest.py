"""What every test session shares: where the test tools are, and how a missing system tool reads.

The test extras (`pip install -e '.[test]'`) bring shellcheck, cmake and ninja as PyPI wheels; pip
puts them next to the interpreter, which is on PATH only in an activated venv. Putting that folder
first makes `python3 -m pytest` (or venv/bin/python -m pytest) find the tools it installed.
What PyPI cannot provide (gcc, binutils, GNU patch, ccache, nvcc) is listed in the README; tests
that need one of them skip with `needs_system_tool` naming the package to install.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_BIN = str(Path(sys.executable).parent)

# tests/data holds recipes and packages the tests build, not tests: a recipe's run_test.py is a
# conda test script that runs inside a test environment, never under pytest.
collect_ignore_glob = ["data/*"]
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join(filter(None, (_BIN, os.environ.get("PATH"))))


@pytest.fixture(autouse=True)
def _process_settings_of_each_test() -> Iterator[None]:
    """The root command puts the environment's process settings in place for the rest of the process
    (condapipe.process_settings); a CLI run in one test must not set another test's unpack limits."""
    from condapipe.process_settings import ProcessSettings, use_process_settings

    yield
    use_process_settings(ProcessSettings())


# tool -> how to get it on Debian/Ubuntu (the README's apt command installs all of these)
APT_TOOLS = {
    "gcc": "apt-get install gcc",
    "g++": "apt-get install g++",
    "readelf": "apt-get install binutils",
    "patch": "apt-get install patch",
    "ccache": "apt-get install ccache",
    "nvcc": "the CUDA toolkit (NVIDIA's apt repository: apt-get install cuda-toolkit-13-0)",
}


def needs_system_tool(*tools: str) -> pytest.MarkDecorator:
    """skipif any tool is missing, with the reason saying what to install."""
    missing = [t for t in tools if shutil.which(t) is None]
    reason = "; ".join(f"needs {t}: {APT_TOOLS.get(t, 'install it')}" for t in missing)
    return pytest.mark.skipif(bool(missing), reason=reason or "all present")


def skip_without(tool: str) -> None:
    """Inside a test or helper: skip (not fail) when a system tool PyPI cannot provide is missing."""
    if shutil.which(tool) is None:
        pytest.skip(f"needs {tool}: {APT_TOOLS.get(tool, 'install it')}")


# --- the real conda-build ---------------------------------------------------------------------------------
# conda and conda-build are not on PyPI. `.ci/run` installs them from ../shared/wheels/conda-build into their
# own venv, `.venv-conda-build/` (not the test venv: conda pins its own dependencies, and a user's conda
# lives apart from condapipe too), with a `.condarc` beside it (solver: rattler, no default channels).
# CONDAPIPE_CONDA_BUILD_VENV names another such venv; when it is set, a venv that does not work is a failure,
# not a skip, so CI cannot silently fall back to skipping the real tool.

REPO = Path(__file__).resolve().parent.parent
CONDA_BUILD_VENV_ENV = "CONDAPIPE_CONDA_BUILD_VENV"
HOW_TO_GET_CONDA_BUILD = (
    "needs the real conda-build: `bash .ci/run` makes .venv-conda-build/ from ../shared/wheels/conda-build "
    f"(its README), or set {CONDA_BUILD_VENV_ENV} to such a venv"
)


def conda_build_venv() -> Path | None:
    """The venv holding the real conda + conda-build, or None when this checkout has none."""
    named = os.environ.get(CONDA_BUILD_VENV_ENV)
    venv = Path(named) if named else REPO / ".venv-conda-build"
    if (venv / "bin" / "conda-build").is_file():
        return venv
    if named:
        pytest.fail(f"{CONDA_BUILD_VENV_ENV}={named} holds no bin/conda-build")
    return None


@pytest.fixture
def real_conda(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Put the real conda first on PATH as a user's machine has it: a `conda` whose `conda build` and
    `conda create` work (the venv's own `conda` script refuses to run uninitialised, so a two-line
    wrapper runs `python -m conda`, which is what an initialised conda runs). Returns the bin folder.
    Skips, naming how to install it, when this checkout has no real conda-build."""
    from condapipe.engines.conda_build import _works

    venv = conda_build_venv()
    if venv is None:
        pytest.skip(HOW_TO_GET_CONDA_BUILD)
    bin_dir = tmp_path_factory.mktemp("real-conda-bin")
    conda = bin_dir / "conda"
    conda.write_text(f'#!/bin/sh\nexec "{venv / "bin" / "python"}" -m conda "$@"\n')
    conda.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # conda's package cache in the test's temp space, not in the venv or the user's ~/.conda.
    monkeypatch.setenv("CONDA_PKGS_DIRS", str(tmp_path_factory.mktemp("conda-pkgs")))
    _works.cache_clear()
    yield bin_dir
    _works.cache_clear()


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[str]:
    """A Redis server on 127.0.0.1 for this test only (no persistence), stopped afterwards: sccache's
    shared store. (Defined here, not in a tests/<stage>/conftest.py: a second module named `conftest`
    would shadow this one for the tests that import its helpers.)"""
    from redis_helpers import redis_server

    with redis_server(tmp_path / "redis") as url:
        yield url

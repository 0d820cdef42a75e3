"""Opt-in (`pytest -m upstream`): the engines' own test recipes come out of `condapipe build`
as they come out of the plain engine.

Takes checkouts nobody here wrote, named by environment variables (fetched, never committed):
CONDAPIPE_UPSTREAM_CONDA_BUILD_RECIPES (conda-build's tests/test-recipes) and
CONDAPIPE_UPSTREAM_RATTLER_BUILD_RECIPES (rattler-build's test-data/recipes). Every
offline-buildable recipe (tests/upstream_recipes.py) is built with the plain engine and with
condapipe against the same local channel (python, pip, setuptools, wheel from `condapipe wheels`,
plus CONDAPIPE_UPSTREAM_WHEELS, a folder of wheels, when set): same outcome (built / skipped /
failed), same packages. CONDAPIPE_UPSTREAM_ONLY (comma-separated paths relative to the checkout)
narrows the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_parity import BUILT, FAILED, condapipe_build, plain_conda_build, plain_rattler_build
from tests.upstream_recipes import select

pytestmark = [pytest.mark.upstream, pytest.mark.slow]
CHECKOUTS = {
    "conda-build": ("CONDAPIPE_UPSTREAM_CONDA_BUILD_RECIPES", "meta.yaml"),
    "rattler-build": ("CONDAPIPE_UPSTREAM_RATTLER_BUILD_RECIPES", "recipe.yaml"),
}


def _cases() -> list[object]:
    only = {s.strip() for s in os.environ.get("CONDAPIPE_UPSTREAM_ONLY", "").split(",") if s.strip()}
    cases: list[object] = []
    for engine, (variable, recipe_file) in CHECKOUTS.items():
        root = os.environ.get(variable)
        if not root:
            cases.append(pytest.param(engine, None, None, marks=pytest.mark.skip(reason=f"set {variable}")))
            continue
        for recipe in select(Path(root), recipe_file):
            name = str(recipe.relative_to(root))
            if only and name not in only:
                continue
            cases.append(pytest.param(engine, Path(root), name, id=f"{engine}:{name}"))
    return cases


@pytest.fixture(scope="session")
def dependency_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """python (this CPython as a venv), and the wheels of CONDAPIPE_UPSTREAM_WHEELS as packages."""
    channel = tmp_path_factory.mktemp("upstream-deps")
    wheels = os.environ.get("CONDAPIPE_UPSTREAM_WHEELS")
    argv = [str(Path(sys.executable).parent / "condapipe"), "wheels", "--to", str(channel)]
    proc = subprocess.run([*argv, *([wheels] if wheels else [])], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return channel


@pytest.mark.parametrize(("engine", "root", "name"), _cases())
def test_an_upstream_recipe_comes_out_as_the_plain_engine_makes_it(
    engine: str,
    root: Path,
    name: str,
    dependency_channel: Path,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    recipe = root / name
    channels = [str(dependency_channel)]
    if engine == "conda-build":
        request.getfixturevalue("real_conda")
        plain = plain_conda_build(recipe, tmp_path / "plain", channels, tmp_path / "croot")
    else:
        plain = plain_rattler_build(recipe, tmp_path / "plain", channels)
    ours = condapipe_build(recipe, engine, tmp_path / "channel", tmp_path / "work", channels)
    print(f"PARITY {engine} {name}: plain {plain.outcome}, condapipe {ours.outcome}")
    if plain.outcome == BUILT and ours.outcome == FAILED and "ignore_prefix_files" in ours.why:
        # Deliberately stricter: the package names a build-machine path (conda-build's
        # work-deleted writes its work folder into a file). The refusal says how to declare it.
        assert "prefix_detection/ignore" in ours.why, ours.why
        return
    assert ours.outcome == plain.outcome, f"plain:\n{plain.why}\ncondapipe:\n{ours.why}"
    assert sorted(ours.packages) == sorted(plain.packages)
    for package, contents in plain.packages.items():
        assert ours.packages[package] == contents, package

"""Build engines: conda-build and rattler-build behind one protocol.

`get_engine` picks one by name; `engine_for_recipe` also checks that the engine can read the
recipe directory it is given (v0 meta.yaml for conda-build, v1 recipe.yaml for rattler-build).

Everything here loads on first use (PEP 562 for the re-exported names): the engine's own process
(rattler_build_child) imports its modules from this package and must not pay for both engines,
their log diagnosis and YAML tables each time a build starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from condapipe.errors import EnvironmentProblem, UsageError

if TYPE_CHECKING:
    from condapipe.engines.base import BuildOptions, Engine, EngineResult
    from condapipe.engines.conda_build import CondaBuildEngine
    from condapipe.engines.logs import LineSink
    from condapipe.engines.rattler_build import RattlerBuildEngine

ENGINE_NAMES = ("auto", "conda-build", "rattler-build")

__all__ = [
    "ENGINE_NAMES",
    "BuildOptions",
    "CondaBuildEngine",
    "Engine",
    "EngineResult",
    "LineSink",
    "RattlerBuildEngine",
    "engine_for_recipe",
    "get_engine",
    "recipe_formats",
]


def __getattr__(name: str) -> Any:
    """A re-exported name, from its module (imported on this first use)."""
    if name in ("V0_RECIPE", "V1_RECIPE", "BuildOptions", "Engine", "EngineResult"):
        from condapipe.engines import base

        return getattr(base, name)
    if name == "CondaBuildEngine":
        from condapipe.engines import conda_build

        return getattr(conda_build, name)
    if name == "RattlerBuildEngine":
        from condapipe.engines import rattler_build

        return getattr(rattler_build, name)
    if name == "LineSink":
        from condapipe.engines import logs

        return getattr(logs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_engine(name: str = "auto") -> Engine:
    """The engine called `name`; `auto` is conda-build when installed, else rattler-build."""
    return _choose(name)[0]


def _choose(name: str) -> tuple[Engine, str]:
    from condapipe.engines.conda_build import CondaBuildEngine
    from condapipe.engines.rattler_build import RattlerBuildEngine

    if name == "conda-build":
        return CondaBuildEngine(), "requested"
    if name == "rattler-build":
        return RattlerBuildEngine(), "requested"
    if name != "auto":
        raise UsageError(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_NAMES)}")
    conda_build = CondaBuildEngine()
    if conda_build.available():
        return conda_build, "auto: `conda build` is available"
    return RattlerBuildEngine(), "auto: conda-build not found, using py-rattler-build"


def recipe_formats(recipe_dir: Path) -> tuple[str, ...]:
    """Which recipe files a directory holds: meta.yaml (v0), recipe.yaml (v1), or both."""
    from condapipe.engines.base import V0_RECIPE, V1_RECIPE

    return tuple(f for f in (V0_RECIPE, V1_RECIPE) if (recipe_dir / f).is_file())


def engine_for_recipe(recipe_dir: Path, name: str = "auto") -> tuple[Engine, str]:
    """The engine to build `recipe_dir` with, and a sentence saying why it was chosen."""
    from condapipe.engines.base import V0_RECIPE, V1_RECIPE
    from condapipe.engines.conda_build import CondaBuildEngine
    from condapipe.engines.rattler_build import RattlerBuildEngine

    present = recipe_formats(recipe_dir)
    if not present:
        raise UsageError(f"{recipe_dir} holds neither {V0_RECIPE} nor {V1_RECIPE}")
    engine, reason = _choose(name)
    if engine.recipe_file in present:
        return engine, reason
    if name == "auto":
        # Only the other format is there: fall back to the engine that reads it, if it can run.
        other: Engine = RattlerBuildEngine() if present == (V1_RECIPE,) else CondaBuildEngine()
        if other.available():
            return other, f"auto: {recipe_dir} has only {other.recipe_file}"
        raise EnvironmentProblem(
            f"{recipe_dir} has only {V0_RECIPE} (a v0 recipe) and conda-build is not installed",
            fix="`conda install conda-build`, or convert it to recipe.yaml (`conda-recipe-manager convert`)",
        )
    raise UsageError(
        f"{engine.name} reads {engine.recipe_file} but {recipe_dir} has only {', '.join(present)}; "
        f"use --engine {'rattler-build' if engine.name == 'conda-build' else 'conda-build'}"
    )

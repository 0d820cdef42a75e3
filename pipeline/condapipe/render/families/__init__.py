"""Package families: one module per recipe family, each exposing `build_model(spec) -> RecipeModel`.

Which families exist is the spec stage's registry (condapipe.buildspec.families: data/spec_families.yaml
and the folders under recipes/); a family's module is found from its name ("cuda-smoke" ->
condapipe.render.families.cuda_smoke).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from condapipe.buildspec.families import known_packages
from condapipe.errors import UsageError


def module_name(package: str) -> str:
    """The module that renders `package` (dashes become underscores)."""
    return f"{__name__}.{package.replace('-', '_')}"


def family_for(package: str) -> ModuleType:
    """The family module of `package`; UsageError listing the known families if there is none."""
    if package not in known_packages():
        raise UsageError(f"unknown package {package!r}; choose one of {', '.join(known_packages())}")
    name = module_name(package)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise UsageError(f"package family {package!r} has no recipe model ({name})") from None
    if not callable(getattr(module, "build_model", None)):
        raise UsageError(f"package family {package!r} has no build_model()")
    return module

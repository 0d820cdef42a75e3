"""Render builders: one module per recipe model, each exposing `build_model(spec) -> RecipeModel`.

Which families exist is the spec stage's registry (condapipe.facts.families: recipes/families.yaml
and each family's profile); a family's builder is the module its registry line names as `model`
("cuda-smoke" -> model cuda_smoke -> condapipe.render.families.cuda_smoke). `script` renders a family
from its profile folder alone.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from condapipe.errors import UsageError
from condapipe.facts.families import profile


def module_name(package: str) -> str:
    """The builder module that renders the family `package` (its profile's model)."""
    return f"{__name__}.{profile(package).model}"


def family_for(package: str) -> ModuleType:
    """The builder module of `package`; UsageError listing the known families if there is none."""
    name = module_name(package)  # UsageError for a package that is no family
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise UsageError(f"package family {package!r} has no recipe model ({name})") from None
    if not callable(getattr(module, "build_model", None)):
        raise UsageError(f"package family {package!r} has no build_model()")
    return module

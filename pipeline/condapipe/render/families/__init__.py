"""Package families: one module per recipe family, each exposing `build_model(spec) -> RecipeModel`.

A family is found by name ("cuda-smoke" -> condapipe.render.families.cuda_smoke), so adding a family is
adding a module; `known_families()` lists what exists for error messages.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from condapipe.errors import UsageError


def known_families() -> tuple[str, ...]:
    """Family names, as users type them (dashes), sorted."""
    names = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return tuple(sorted(n.replace("_", "-") for n in names))


def family_for(package: str) -> ModuleType:
    """The family module of `package`; UsageError listing the known families if there is none."""
    if package not in known_families():
        raise UsageError(f"unknown package {package!r}; choose one of {', '.join(known_families())}")
    module = importlib.import_module(f"{__name__}.{package.replace('-', '_')}")
    if not callable(getattr(module, "build_model", None)):
        raise UsageError(f"package family {package!r} has no build_model()")
    return module

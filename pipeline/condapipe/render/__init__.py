"""render: BuildSpec -> a recipe directory (conda-build v0 and rattler-build v1) from one model.

Entry points: `render_recipe` (spec -> recipe dir), or in two halves `build_model` (spec ->
RecipeModel) and `render_model` (model -> files on disk); `family_for` finds a family's module;
the patch catalog is `load_catalog` / `applicable`, checked against a tree by `check_entries`.
"""

from condapipe.render.families import family_for
from condapipe.render.model import RecipeModel
from condapipe.render.patch_catalog import applicable, load_catalog
from condapipe.render.patch_check import check_entries
from condapipe.render.recipe_dir import RenderResult, build_model, render_model, render_recipe

__all__ = [
    "RecipeModel",
    "RenderResult",
    "applicable",
    "build_model",
    "check_entries",
    "family_for",
    "load_catalog",
    "render_model",
    "render_recipe",
]

"""The variant config a recipe directory carries, found and read the way rattler-build does.

`rattler-build build` takes `variants.yaml` next to the recipe, else `conda_build_config.yaml`
(read with its `# [selector]` lines for the target platform). condapipe's build and its
resolve-first step read the same file the same way, so both see the variants the engine builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

VARIANT_FILES = ("variants.yaml", "conda_build_config.yaml")


def recipe_variant_file(recipe_dir: Path) -> Path | None:
    """The variant file rattler-build would pick up in `recipe_dir`, or None."""
    for name in VARIANT_FILES:
        path = recipe_dir / name
        if path.is_file():
            return path
    return None


def load_variant_config(path: Path, target_platform: str | None) -> Any:
    """A py-rattler-build VariantConfig of `path`; selectors are evaluated for `target_platform`
    (None: this machine's). Raises rattler_build.RattlerBuildError for a file it cannot read."""
    import rattler_build as rb

    platform = rb.PlatformConfig(target_platform=target_platform) if target_platform else rb.PlatformConfig()
    return rb.VariantConfig.from_files_with_context([path], rb.JinjaConfig(platform=platform))

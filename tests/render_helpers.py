"""Helpers for the render tests: run `condapipe render`, apply v0 selectors, render v1 with rattler-build.

The v0 check mimics what conda-build does with meta.yaml (Jinja over the text with the variant's
values, then keep or drop each line by its ``# [selector]``) so the test sees exactly the YAML
conda-build would parse; the v1 check uses py-rattler-build's own parser and renderer.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import jinja2
from click.testing import CliRunner, Result
from ruamel.yaml import YAML

from condapipe.cli.main import main

_SELECTOR = re.compile(r"\s+#\s*\[(?P<expr>.+)\]\s*$")


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def load_yaml(text: str) -> Any:
    return YAML(typ="safe").load(text)


def variant_combos(cbc: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every combination conda-build would build from conda_build_config.yaml (zip_keys honoured)."""
    zips = [tuple(group) for group in cbc.get("zip_keys", [])]
    zipped = {key for group in zips for key in group}
    axes: list[list[dict[str, str]]] = []
    for group in zips:
        length = len(cbc[group[0]])
        axes.append([{key: str(cbc[key][i]) for key in group} for i in range(length)])
    for key, values in cbc.items():
        if key != "zip_keys" and key not in zipped:
            axes.append([{key: str(v)} for v in values])
    return [dict(item for part in combo for item in part.items()) for combo in itertools.product(*axes)]


def selector_namespace(platform: str, variant: dict[str, str]) -> dict[str, Any]:
    py = variant.get("python", "3.10")
    major, minor = py.split(".")
    return {
        "linux": platform.startswith("linux"),
        "linux64": platform == "linux-64",
        "aarch64": platform == "linux-aarch64",
        "x86_64": platform.endswith("-64"),
        "unix": True,
        "osx": False,
        "win": False,
        "py": int(major + minor),
        **variant,
    }


def v0_meta(
    recipe_dir: Path, platform: str, variant: dict[str, str], environ: dict[str, str] | None = None
) -> dict[str, Any]:
    """meta.yaml as conda-build reads it for one variant: Jinja (conda-build's `environ` is the
    process environment: none here unless given), then selectors, then YAML."""
    text = (recipe_dir / "meta.yaml").read_text()
    template = jinja2.Template(text, undefined=jinja2.StrictUndefined)
    rendered = template.render(environ=environ or {}, **variant)
    namespace = {**selector_namespace(platform, variant), "environ": environ or {}}
    kept: list[str] = []
    for line in rendered.splitlines():
        match = _SELECTOR.search(line)
        if match:
            if not eval(match["expr"], {"__builtins__": {}}, namespace):
                continue
            line = line[: match.start()]
        kept.append(line)
    return load_yaml("\n".join(kept))


def v1_render(recipe_dir: Path, platform: str) -> list[Any]:
    """recipe.yaml rendered by py-rattler-build with variants.yaml for `platform`."""
    from rattler_build.render import RenderConfig
    from rattler_build.stage0 import Stage0Recipe
    from rattler_build.tool_config import PlatformConfig
    from rattler_build.variant_config import VariantConfig

    recipe = Stage0Recipe.from_file(recipe_dir / "recipe.yaml")
    variants = VariantConfig.from_file(recipe_dir / "variants.yaml")
    return recipe.render(variants, RenderConfig(platform=PlatformConfig(target_platform=platform)))


def recipe_files(recipe_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(recipe_dir.iterdir()) if p.is_file()}


_LAUNCHER_LINE = re.compile(r"^\s*(?:command|LAUNCHER)\s*=\s*(\S+)", re.M)


def compiler_launchers(build_dir: Path) -> set[str]:
    """Programs a CMake Ninja build puts in front of its compilers (ccache, sccache, ...).

    CMake writes a target's launcher into its compile rule's command (rules.ninja, CMake 3.x) or
    as the edge's LAUNCHER variable (build.ninja, newer releases): the first word of either that
    names a compiler cache is a launcher.
    """
    found: set[str] = set()
    for name in ("CMakeFiles/rules.ninja", "build.ninja"):
        path = build_dir / name
        if path.is_file():
            for first in _LAUNCHER_LINE.findall(path.read_text(errors="replace")):
                if Path(first).name in {"ccache", "sccache"}:
                    found.add(first)
    return found

"""The environments a plan's recipes ask for: build, host and test specs of every variant.

Recipes are rendered the way rattler-build renders them (py-rattler-build's Stage0Recipe:
selectors, variants, and the variant pin of bare names, `python` -> `python =3.11`), so what
condapipe.plan.resolve solves is what the engine will solve. Family jobs are rendered from their
recipe model in memory (nothing written); recipe directories from their recipe.yaml.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from condapipe.errors import UsageError
from condapipe.scratch import scratch_dir

if TYPE_CHECKING:
    from condapipe.plan.jobs import Job

_NAME = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)")


@dataclass(frozen=True)
class Environment:
    """One environment an engine will create: whose, which (build/host/test), for which subdir."""

    job: str  # the job label
    kind: str  # build | host | test
    platform: str
    specs: tuple[str, ...]


@dataclass(frozen=True)
class RecipeFacts:
    """What rendering one variant of a job's recipe tells the resolver."""

    job: str
    package: str  # the conda package name the variant builds
    version: str
    build_string: str
    platform: str
    run: tuple[str, ...]  # pinned run requirements (what a package that depends on it gets)
    environments: tuple[Environment, ...]
    source: str  # where the source comes from, for --dry-run


def spec_name(spec: str) -> str:
    match = _NAME.match(spec)
    return match.group(1) if match else spec.strip()


def pin_to_variant(spec: str, variant: dict[str, Any]) -> str:
    """A bare name that is a variant key gets the variant's value, as rattler-build applies it:
    `python` with python=3.11 -> `python =3.11` (a plain version means "starts with")."""
    text = spec.strip()
    name = spec_name(text)
    if text != name or name not in variant:
        return text
    value = str(variant[name])
    return f"{name} ={value}" if re.fullmatch(r"[A-Za-z0-9.]+", value) else f"{name} {value}"


def _source_text(sources: Any, recipe_dir: Path | None) -> str:
    """Where a rendered recipe's source comes from, as a person reads it."""
    items = sources if isinstance(sources, list) else [sources] if sources else []
    shown = []
    for src in items:
        if not isinstance(src, dict):
            continue
        if "git" in src:
            shown.append(f"git {src['git']} at {src.get('rev') or src.get('tag') or 'HEAD'}")
        elif "url" in src:
            url = src["url"] if isinstance(src["url"], str) else ", ".join(src["url"])
            sha = src.get("sha256")
            shown.append(f"{url}" + (f" (sha256 {sha})" if sha else ""))
        elif "path" in src:
            path = Path(str(src["path"]))
            if not path.is_absolute() and recipe_dir is not None:
                path = recipe_dir / path
            shown.append(f"local {path}")
        patches = src.get("patches") or []
        if patches:
            shown[-1] += f", {len(patches)} patch{'es' if len(patches) != 1 else ''}"
    return "; ".join(shown) or "none (the recipe carries its files)"


def _test_specs(tests: Any) -> list[str]:
    """Requirements of a v1 recipe's tests (python tests need python)."""
    specs: list[str] = []
    for test in tests or []:
        if not isinstance(test, dict):
            continue
        if "python" in test:
            specs.append("python")
            if (test.get("python") or {}).get("pip_check", True):
                specs.append("pip")
        if "script" in test:
            req = test.get("requirements") or {}
            specs += [str(s) for s in req.get("run", []) or []]
    return specs


def _deps(value: Any) -> list[str]:
    """Requirement strings of a rendered section (pin_subpackage dicts give their name)."""
    out = []
    for item in value or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for key in ("pin_subpackage", "pin_compatible"):
                if isinstance(item.get(key), dict) and item[key].get("name"):
                    out.append(str(item[key]["name"]))
    return out


def _first_line(exc: BaseException) -> str:
    """The engine's message, one line and at most 300 characters (not its whole dump)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= 300 else text[:297] + "..."


def _user_recipe(rb: Any, recipe: Path, variants_file: Path) -> tuple[Any, Any]:
    """A user's recipe.yaml (and variants.yaml) parsed by rattler-build; what it cannot parse
    (unclosed YAML, an empty file, a list, an unknown anchor) is a one-line UsageError."""
    shown = recipe
    try:
        parsed = rb.Stage0Recipe.from_file(recipe)
        shown = variants_file
        has_variants = variants_file.is_file()
        variants = rb.VariantConfig.from_file(variants_file) if has_variants else rb.VariantConfig()
    except rb.RattlerBuildError as exc:
        raise UsageError(f"cannot parse {shown}: {_first_line(exc)}") from None
    return parsed, variants


def render_job(job: Job, build_platform: str, run_tests: bool) -> list[RecipeFacts]:
    """The environments of `job`, one RecipeFacts per variant its recipe renders to; [] when only a
    meta.yaml exists (conda-build renders and solves that itself, before it compiles)."""
    # py-rattler-build writes a recipe given as text into a folder (a temp one of its own, never
    # removed, unless told where): a scratch folder of ours, removed afterwards.
    with scratch_dir("condapipe-render-") as scratch:
        return _render_job(job, build_platform, run_tests, scratch)


def _render_job(job: Job, build_platform: str, run_tests: bool, scratch: Path) -> list[RecipeFacts]:
    import rattler_build as rb

    from condapipe.engines.base import V1_RECIPE

    recipe_dir: Path | None = None
    if job.spec is not None:
        from condapipe.render.recipe_dir import build_model
        from condapipe.render.v1 import recipe_yaml

        model = build_model(job.spec)
        recipe = rb.Stage0Recipe.from_yaml(recipe_yaml(model), recipe_dir=scratch)
        keys = {key: list(values) for key, values in model.variants.keys}
        zips = [list(group) for group in model.variants.zip_keys] or None
        variants = rb.VariantConfig(keys, zips)
    else:
        assert job.recipe_dir is not None
        recipe_dir = job.recipe_dir
        if not (recipe_dir / V1_RECIPE).is_file():
            return []
        recipe, variants = _user_recipe(rb, recipe_dir / V1_RECIPE, recipe_dir / "variants.yaml")
        if job.pythons:
            variants = variants.merge(rb.VariantConfig({"python": list(job.pythons)}))
    target = job.platform or build_platform
    config = rb.RenderConfig(platform=rb.PlatformConfig(target_platform=target)) if job.platform else None
    facts = []
    try:
        renders = recipe.render(variants, config)
    except rb.RattlerBuildError as exc:
        if recipe_dir is None:
            raise  # a recipe condapipe rendered itself: a bug, not the user's input
        raise UsageError(f"cannot render {recipe_dir / V1_RECIPE}: {_first_line(exc)}") from None
    for rendered in renders:
        data = rendered.recipe.to_dict()
        variant = dict(rendered.variant)
        req = data.get("requirements") or {}
        pin = [pin_to_variant(s, variant) for s in _deps(req.get("run"))]
        envs = [
            Environment(
                job.label,
                "build",
                build_platform,
                tuple(pin_to_variant(s, variant) for s in _deps(req.get("build"))),
            ),
            Environment(
                job.label, "host", target, tuple(pin_to_variant(s, variant) for s in _deps(req.get("host")))
            ),
        ]
        if run_tests and data.get("tests"):
            test = [*pin, *(pin_to_variant(s, variant) for s in _test_specs(data.get("tests")))]
            envs.append(Environment(job.label, "test", target, tuple(dict.fromkeys(test))))
        package = data.get("package") or {}
        build = data.get("build") or {}
        facts.append(
            RecipeFacts(
                job=job.label,
                package=str(package.get("name", job.name)),
                version=str(package.get("version", "0")),
                build_string=str(build.get("string") or f"planned_{build.get('number', 0)}"),
                platform="noarch" if build.get("noarch") else target,
                run=tuple(pin),
                environments=tuple(e for e in envs if e.specs),
                source=_source_text(data.get("source"), recipe_dir),
            )
        )
    return facts

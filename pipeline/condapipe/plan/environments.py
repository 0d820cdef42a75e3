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
    package: str = ""  # the output it is for: its sibling outputs of the same recipe are offered to it


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
    if text != name or name not in variant or name.startswith("__"):
        return text  # a virtual package (`__unix`) is never a version pin
    value = str(variant[name]).strip()
    if not value or value == name:
        return text
    if re.fullmatch(r"[A-Za-z0-9.]+", value):
        return f"{name} ={value}"
    pinned = re.fullmatch(r"([A-Za-z0-9_.+!]+) ([A-Za-z0-9_.+]+)", value)
    if pinned:  # a sibling output's exact pin (pin_subpackage): "1.0 h1234_0"
        return f"{name} =={pinned.group(1)} {pinned.group(2)}"
    return f"{name} {value}"


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
    from condapipe.engines.recipe_skip import is_skipped
    from condapipe.engines.recipe_variants import load_variant_config, recipe_variant_file
    from condapipe.engines.render_error import engine_message

    recipe_dir: Path | None = None
    if job.spec is not None:
        from condapipe.render.recipe_dir import build_model, source_checked
        from condapipe.render.v1 import recipe_yaml

        # the plan's model, built once; its --source checked here, as the render step will
        model = source_checked(job.model, job.spec) if job.model else build_model(job.spec)
        recipe = rb.Stage0Recipe.from_yaml(recipe_yaml(model), recipe_dir=scratch)
        keys = {key: list(values) for key, values in model.variants.keys}
        zips = [list(group) for group in model.variants.zip_keys] or None
        variants = rb.VariantConfig(keys, zips)
    else:
        assert job.recipe_dir is not None
        recipe_dir = job.recipe_dir
        if not (recipe_dir / V1_RECIPE).is_file():
            return []
        variant_file = recipe_variant_file(recipe_dir)
        try:
            recipe = rb.Stage0Recipe.from_file(recipe_dir / V1_RECIPE)
        except rb.RattlerBuildError as exc:
            raise UsageError(f"cannot parse {recipe_dir / V1_RECIPE}: {engine_message(str(exc))}") from None
        variants = rb.VariantConfig()
        for file in [variant_file, *job.variant_files]:
            if file is None:
                continue
            try:
                variants = variants.merge(load_variant_config(file, job.platform))
            except rb.RattlerBuildError as exc:
                raise UsageError(f"cannot parse {file}: {engine_message(str(exc))}") from None
        if job.pythons:
            variants = variants.merge(rb.VariantConfig({"python": list(job.pythons)}))
    target = job.platform or build_platform
    config = rb.RenderConfig(platform=rb.PlatformConfig(target_platform=target)) if job.platform else None
    try:
        renders = list(recipe.render(variants, config))
    except rb.RattlerBuildError as exc:
        shown = recipe_dir / V1_RECIPE if recipe_dir is not None else job.label
        raise UsageError(f"cannot render {shown}: {engine_message(str(exc))}") from None
    stage0 = recipe.to_dict()
    facts = []
    for rendered in renders:
        data = rendered.recipe.to_dict()
        variant = dict(rendered.variant)
        if is_skipped(stage0, variant, config):
            continue  # the engine builds nothing of it: nothing to solve
        req = data.get("requirements") or {}
        pin = [pin_to_variant(s, variant) for s in _deps(req.get("run"))]
        package = data.get("package") or {}
        name = str(package.get("name", job.name))
        build_specs = tuple(pin_to_variant(s, variant) for s in _deps(req.get("build")))
        host_specs = tuple(pin_to_variant(s, variant) for s in _deps(req.get("host")))
        if (data.get("build") or {}).get("merge_build_and_host_envs"):
            # one environment, solved for the target: rattler-build installs host and build together
            merged = tuple(dict.fromkeys(host_specs + build_specs))
            envs = [Environment(job.label, "host", target, merged, name)]
        else:
            envs = [
                Environment(job.label, "build", build_platform, build_specs, name),
                Environment(job.label, "host", target, host_specs, name),
            ]
        if run_tests and data.get("tests"):
            test = [*pin, *(pin_to_variant(s, variant) for s in _test_specs(data.get("tests")))]
            envs.append(Environment(job.label, "test", target, tuple(dict.fromkeys(test)), name))
        build = data.get("build") or {}
        facts.append(
            RecipeFacts(
                job=job.label,
                package=name,
                version=str(package.get("version", "0")),
                build_string=str(build.get("string") or f"planned_{build.get('number', 0)}"),
                platform="noarch" if build.get("noarch") else target,
                run=tuple(pin),
                environments=tuple(e for e in envs if e.specs),
                source=_source_text(data.get("source"), recipe_dir),
            )
        )
    return facts

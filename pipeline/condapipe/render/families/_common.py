"""Helpers shared by the package families: templates, patch-catalog selection, variant rows.

Families differ in what they say, not in how they read templates or apply the patch catalog,
so those mechanics live here once.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.compile_cache import sccache_env_names
from condapipe.errors import UsageError
from condapipe.facts.compile_jobs import compile_job_gib
from condapipe.facts.families import family_facts, profile, recipes_dir
from condapipe.facts.promise import promise_record
from condapipe.render.model import ALWAYS, Dep, Patch, Variants, When

# A package with CPython extension modules (torch._C, torchvision._C) loads only in the Python X.Y it
# was compiled for. conda-build pins a bare `python` run requirement to the variant (its default
# pin_run_as_build), rattler-build does not: there only a python package's run_exports would (as
# conda-forge's python_abi does), and a python from `condapipe wheels` or another channel has none.
# So the recipe says it, the same for both engines.
PYTHON_RUN = Dep("python {{ python }}.*")


@cache
def _environment(root: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["bash_quote"] = shlex.quote
    return env


def render_template(name: str, **values: Any) -> str:
    """Render recipes/<name> (e.g. "pytorch/build.sh.j2"); a missing value is an error, not ""."""
    return _environment(recipes_dir()).get_template(name).render(**values)


def compile_cache_values(cache_key: str) -> dict[str, Any]:
    """What recipes/common/compile_cache.sh.j2 needs: the variant's ccache subdirectory and the
    sccache settings build.sh receives by name (the same names go into the recipe's secrets)."""
    return {"cache_key": cache_key, "sccache_env": sccache_env_names()}


def per_job_mib(family: str, version: str | None) -> dict[str, int]:
    """The MiB per compile job build.sh's MAX_JOBS fallback uses, for CPU and CUDA variants: the
    same figure doctor picks MAX_JOBS with (condapipe.facts.compile_jobs)."""
    return {
        f"per_job_mib_{kind}": round(compile_job_gib(family, version, cuda=kind == "cuda") * 1024)
        for kind in ("cpu", "cuda")
    }


def family_data(family: str) -> dict[str, Any]:
    """The facts of the family's profile (recipes/<folder>/family.yaml less the sections other
    stages read): its own small facts (e.g. memory per compile job)."""
    return family_facts(family)


def family_dir(family: str) -> Path:
    """The family's profile folder (templates, test files, sources)."""
    return profile(family).path


@dataclass(frozen=True)
class CatalogSelection:
    """What the patch catalog contributes to one recipe: patch files and config env."""

    patches: tuple[Patch, ...]
    env: tuple[tuple[str, str], ...]  # config env that holds for every CUDA variant
    env_by_cuda: tuple[tuple[tuple[str, ...], str, str], ...]  # (cuda values, name, value): some only


def _when_cuda(cudas: Sequence[str], all_cudas: Sequence[str]) -> When:
    return ALWAYS if list(cudas) == list(all_cudas) else When(cuda=tuple(cudas))


def select_catalog(spec: BuildSpec, family: str, versions: dict[str, str]) -> CatalogSelection:
    """Apply condapipe.render.patch_catalog per CUDA variant and merge, keeping catalog order: the
    entries the family's profile names (`patches:` its upstream, in its catalog).

    `versions` maps each CUDA variant value to the upstream version built for it (magma's
    version depends on the CUDA; pytorch's does not).
    """
    from condapipe.render.patch_catalog import applicable, load_catalog

    source = profile(family).patches
    if not source.upstream:
        return CatalogSelection(patches=(), env=(), env_by_cuda=())
    catalog = load_catalog(source.index)
    package = source.upstream
    all_cudas = list(spec.cudas)
    order: list[str] = []
    entries: dict[str, Any] = {}
    where: dict[str, list[str]] = {}
    for cuda in all_cudas:
        # board: Jetson-only entries apply to that board's builds, never to other aarch64 builds.
        for entry in applicable(
            package, versions[cuda], cuda, spec.platform, board=spec.jetson, catalog=catalog
        ):
            if entry.id not in entries:
                order.append(entry.id)
                entries[entry.id] = entry
            where.setdefault(entry.id, []).append(cuda)
    # Catalog position, not first sighting: with several CUDAs an entry that applies only to a
    # later CUDA must still land where the catalog puts it.
    position = {entry.id: i for i, entry in enumerate(catalog.entries)}
    order.sort(key=position.__getitem__)
    patches: list[Patch] = []
    env: list[tuple[str, str]] = []
    env_some: list[tuple[tuple[str, ...], str, str]] = []
    names: dict[str, str] = {}
    for entry_id in order:
        entry = entries[entry_id]
        cudas = where[entry_id]
        if entry.patch_file is not None:
            name = entry.patch_file.name
            if names.setdefault(name, entry_id) != entry_id:
                raise UsageError(f"patch catalog: {names[name]} and {entry_id} share the file name {name}")
            patches.append(Patch(name=name, origin=entry.patch_file, when=_when_cuda(cudas, all_cudas)))
        for key, value in entry.env:
            if cudas == all_cudas:
                env.append((key, value))
            else:
                env_some.append((tuple(cudas), key, value))
    return CatalogSelection(tuple(patches), tuple(env), tuple(env_some))


def variant_matrix(
    pythons: Iterable[str], rows: Sequence[dict[str, str]], *, cuda_key: str = "cuda_version"
) -> Variants:
    """Python axis x one row of zipped keys per CUDA variant (all rows have the same keys)."""
    keys: list[tuple[str, tuple[str, ...]]] = []
    py = tuple(pythons)
    if py:
        keys.append(("python", py))
    columns = list(rows[0]) if rows else []
    if columns and columns[0] != cuda_key:
        raise ValueError(f"the first variant column must be {cuda_key}")
    for column in columns:
        keys.append((column, tuple(row[column] for row in rows)))
    zips = (tuple(columns),) if len(columns) > 1 else ()
    return Variants(keys=tuple(keys), zip_keys=zips)


def common_value(rows: Sequence[dict[str, str]], key: str) -> str | None:
    """The value of `key` when every variant row has the same one, else None."""
    values = {row[key] for row in rows}
    return values.pop() if len(values) == 1 else None


def promise_extra(
    rows: Sequence[dict[str, str]], *, archs_key: str
) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """The recipe `extra` by which each package records its CUDA and arch list (none for cpu only).

    A value shared by every variant is written out; one that differs refers to its variant key.
    """
    if all(row["cuda_version"] == "cpu" for row in rows):
        return ()

    def value(key: str) -> str:
        return common_value(rows, key) or "{{ " + key + " }}"

    return (promise_record(value("cuda_version"), value(archs_key)),)

"""The specs a family plan builds: a prerequisite family's for one CUDA, a companion's (--with)
built against the family's, one spec per CUDA x Python variant, and the label and conda package
each is planned under.

`planned_specs` resolves them all, in build order, from the BuildSpec (whose CUDA axis the
settings cascade read once) and the family profiles, so planning only turns each into a job and
never comes back here or to the facts to ask.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from condapipe.buildspec.build_spec import BuildSpec, CudaVariant
from condapipe.errors import UsageError
from condapipe.facts.families import cuda_table_package, family_facts, family_rules, profile


def prerequisite_spec(family: str, spec: BuildSpec, variant: CudaVariant) -> BuildSpec:
    """The spec of a prerequisite family for one CUDA variant of `spec`.

    Exactly the spec of a user's `condapipe build FAMILY --cuda X`: build_spec gives a package the
    CUDA table names the table's build number (magma-cuda118 2.6.1 build 1), for both.
    """
    from condapipe.buildspec.build_spec import build_spec

    return build_spec(family, {"cuda": [variant.cuda], "platform": spec.platform})


def companion_spec(family: str, spec: BuildSpec, source: str | None = None) -> BuildSpec:
    """The spec of `family` built against `spec` in the same plan (`--with FAMILY`).

    The companion's profile names the family it is built against (`built_against`); its release is
    the one that pairs with `spec`'s (torchvision.yaml for torchvision), with the same Pythons,
    platform and, per CUDA variant, the same arch list and cuDNN, and it pins `spec`'s build number.
    `source` (the config file's [packages.<family>] source: a folder or release archive) replaces
    the family's upstream, e.g. on a machine without network.
    """
    from condapipe.buildspec.build_spec import build_spec

    against = family_facts(family).get("built_against")
    if against != spec.package:
        raise UsageError(
            f"--with {family}: {family} is built against {against or 'no other family'}, not {spec.package}"
        )
    version = family_rules(family).version.companion_version(spec.version)
    settings = {
        "version": version,
        "python": list(spec.pythons),
        "cuda": list(spec.cudas),
        "platform": spec.platform,
    }
    if source:
        settings["source"] = source
    try:
        companion = build_spec(family, settings)
    except UsageError as exc:
        if not source:
            raise
        # the source came from the config file, not from a --source flag: say where
        raise UsageError(str(exc).replace("--source", f"[packages.{family}] source", 1)) from None
    variants = tuple(
        dataclasses.replace(mine, archs=theirs.archs, cudnn=theirs.cudnn)
        for mine, theirs in zip(companion.cuda_variants, spec.cuda_variants, strict=True)
    )
    return dataclasses.replace(
        companion,
        cuda_variants=variants,
        jetson=spec.jetson,
        against=((spec.package, str(spec.build_number)),),
        warnings=(),  # the spec's own warnings were printed for it
    )


def prerequisite_package(family: str, variant: CudaVariant) -> str:
    """The conda package a prerequisite family builds for one CUDA variant."""
    table = cuda_table_package(family, variant.cuda)
    return table.package if table else family


def variant_specs(spec: BuildSpec) -> list[BuildSpec]:
    """One spec per CUDA × Python variant: each multi-hour build resumes on its own."""
    out = []
    for variant in spec.cuda_variants:
        for py in spec.pythons or (None,):
            out.append(dataclasses.replace(spec, cuda_variants=(variant,), pythons=(py,) if py else ()))
    return out


def job_label(spec: BuildSpec) -> str:
    """package-version[-pyX.Y]-cudaX.Y|cpu; a package the CUDA table names carries its CUDA in its
    name (`<package>-<version>`)."""
    v = spec.cuda_variants[0] if spec.cuda_variants else None
    table = cuda_table_package(spec.package, v.cuda) if v is not None else None
    parts = [table.package if table else spec.package, spec.version]
    if spec.pythons:
        parts.append(f"py{spec.pythons[0]}")
    if v is not None and table is None:
        parts.append("cpu" if v.is_cpu else f"cuda{v.cuda}")
    return "-".join(p for p in parts if p)


def variant_key(spec: BuildSpec) -> tuple[str, tuple[str, ...]]:
    """(CUDA, Pythons) of a one-variant spec: how a companion's variant finds its own."""
    return (spec.cuda_variants[0].cuda if spec.cuda_variants else "", spec.pythons)


@dataclass(frozen=True)
class PlannedSpec:
    """One job's spec as planning takes it: the label it is known by, the conda package it builds,
    and the labels of the planned specs whose packages it consumes."""

    label: str
    package: str
    spec: BuildSpec  # one CUDA x Python variant (a prerequisite: its one CUDA)
    prerequisite: bool = False  # built only when no channel in use has `package`
    needs: tuple[str, ...] = ()


def planned_specs(
    spec: BuildSpec, companions: Sequence[str] = (), companion_sources: Mapping[str, str] | None = None
) -> list[PlannedSpec]:
    """Prerequisites (once per CUDA, on the platforms the profile names), one spec per variant of
    `spec`, then one per variant of each companion family (`--with`, from its source in
    `companion_sources` if named there), each needing the variant of `spec` it is built against."""
    planned: list[PlannedSpec] = []
    prereq_labels: dict[str, list[str]] = {}
    # The profile says on which platforms each prerequisite exists (no magma-cudaXY for aarch64).
    for family in profile(spec.package).prerequisites_on(spec.platform):
        for variant in spec.cuda_variants:
            if variant.is_cpu:
                continue
            pspec = prerequisite_spec(family, spec, variant)
            label = job_label(pspec)
            planned.append(
                PlannedSpec(label, prerequisite_package(family, variant), pspec, prerequisite=True)
            )
            prereq_labels.setdefault(variant.cuda, []).append(label)
    for vspec in variant_specs(spec):
        cuda = vspec.cuda_variants[0].cuda if vspec.cuda_variants else None
        planned.append(
            PlannedSpec(
                job_label(vspec), vspec.package, vspec, needs=tuple(prereq_labels.get(cuda or "", ()))
            )
        )
    primary = {variant_key(p.spec): p.label for p in planned if not p.prerequisite}
    for family in dict.fromkeys(companions):
        for vspec in variant_specs(companion_spec(family, spec, (companion_sources or {}).get(family))):
            planned.append(
                PlannedSpec(job_label(vspec), vspec.package, vspec, needs=(primary[variant_key(vspec)],))
            )
    return planned

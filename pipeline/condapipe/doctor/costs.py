"""How much disk a build needs, from the measured figures its family's profile names.

A flat "40 GiB per variant" blocked a second Python on a 64 GiB disk although the plan builds one
variant at a time, the engine deletes each build tree once its package is made, and a further
Python compiles only its bindings (the C++ core comes from the shared compile cache). So the
first variant pays for a build tree and every further one only for what it adds: its package
copies and its objects in the cache. The figures are the family's own (`doctor: build_costs:` in its
profile: recipes/pytorch/build_costs.yaml, which libtorch names too); families without
measurements (magma, cuda-smoke) keep their profile's per-variant `disk_gib`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.variant import CudaVariant
from condapipe.errors import UsageError
from condapipe.facts.families import DoctorNeeds

GIB = 1024.0  # MiB per GiB
COST_KEYS = ("configured_tree_mib", "objects", "python_objects", "object_kib", "cu_archs_default", "margin")


@cache
def build_costs(path: Path) -> dict[str, Any]:
    """The measured figures of one build_costs.yaml; UsageError naming the file when one is missing."""
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    missing = [k for k in COST_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise UsageError(f"{path}: no {', '.join(missing)} (the measured build costs)")
    return data


@dataclass(frozen=True)
class DiskNeed:
    """The estimate, split so the finding can say what each part is."""

    first_gib: float  # the first variant: build tree, libraries, packages
    extra_gib: float  # every further variant together: package copies and compile-cache objects
    variants: int

    @property
    def total_gib(self) -> float:
        return self.first_gib + self.extra_gib


def _objects_mib(facts: dict[str, Any], variant: CudaVariant) -> float:
    kib = facts["object_kib"]
    objects = facts["objects"]
    cpu = sum(objects[k] * kib[k] for k in ("c", "cc", "cpp"))
    if variant.is_cpu:
        return cpu / 1024
    archs = len(variant.archs) if variant.archs is not None else int(facts["cu_archs_default"])
    return (cpu + objects["cu"] * kib["cu_per_arch"] * archs) / 1024


def _measured(spec: BuildSpec, facts: dict[str, Any]) -> DiskNeed:
    pythons = max(1, len(spec.pythons))
    shared_cache = pythons > 1
    bindings = facts["python_objects"] * facts["object_kib"]["cpp"] / 1024
    first = extra = 0.0
    for n, variant in enumerate(spec.cuda_variants):
        objects = _objects_mib(facts, variant)
        package = objects  # the linked libraries, uncompressed
        cache_objects = objects if shared_cache else 0.0
        if n == 0:
            first = facts["configured_tree_mib"] + 2 * objects + 3 * package + cache_objects
        else:
            extra += 3 * package + cache_objects
        extra += (pythons - 1) * (3 * package + bindings)
    margin = float(facts["margin"])
    count = len(spec.cuda_variants) * pythons
    return DiskNeed(first * margin / GIB, extra * margin / GIB, count)


def disk_need(spec: BuildSpec, needs: DoctorNeeds) -> DiskNeed:
    """Free disk the build of `spec` needs: from the family's measured build costs where it has
    them, else its per-variant `disk_gib` (cuda/cpu)."""
    if needs.build_costs is not None:
        return _measured(spec, build_costs(needs.build_costs))
    per_variant = needs.disk_gib
    pythons = max(1, len(spec.pythons))
    sizes = [float(per_variant["cpu" if v.is_cpu else "cuda"]) for v in spec.cuda_variants] or [0.0]
    count = len(spec.cuda_variants) * pythons
    return DiskNeed(sizes[0], sum(sizes) * pythons - sizes[0], count)

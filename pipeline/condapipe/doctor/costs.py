"""How much disk a build needs, from the measured figures of data/build_costs.yaml.

A flat "40 GiB per variant" blocked a second Python on a 64 GiB disk although the plan builds one
variant at a time, the engine deletes each build tree once its package is made, and a further
Python compiles only its bindings (the C++ core comes from the shared compile cache). So the
first variant pays for a build tree and every further one only for what it adds: its package
copies and its objects in the cache. Families without measurements (magma, cuda-smoke) keep
doctor.yaml's per-variant `disk_gib`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ruamel.yaml import YAML

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.variant import CudaVariant

GIB = 1024.0  # MiB per GiB
_MEASURED_FAMILY = {"pytorch": "pytorch", "libtorch": "pytorch"}  # the same sources, the same tree


@cache
def build_costs() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("build_costs.yaml").read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


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


def disk_need(spec: BuildSpec, per_variant: dict[str, float]) -> DiskNeed:
    """Free disk the build of `spec` needs; `per_variant` (doctor.yaml disk_gib: cuda/cpu) for
    families build_costs.yaml has no measurements of."""
    measured = _MEASURED_FAMILY.get(spec.package)
    if measured is not None:
        return _measured(spec, build_costs()[measured])
    pythons = max(1, len(spec.pythons))
    sizes = [float(per_variant["cpu" if v.is_cpu else "cuda"]) for v in spec.cuda_variants] or [0.0]
    count = len(spec.cuda_variants) * pythons
    return DiskNeed(sizes[0], sum(sizes) * pythons - sizes[0], count)

"""How much memory one compile job of a build needs: the figure MAX_JOBS is derived from.

MAX_JOBS = min(cores, MemAvailable / this figure), at least 1: the machine gives both bounds, the
family gives the per-job figure, measured for each variant kind (a CPU translation unit is not an
nvcc job compiling CUTLASS kernels for several archs). `condapipe doctor` picks MAX_JOBS with it and
the rendered build.sh falls back on the same figure when it runs without doctor, so the two never
disagree. Each family states it once, in its profile (`compile_job_gib:` in recipes/<family>/
family.yaml): a number, a list of {versions, gib} rows for figures that change with the release,
or the name of a family whose figure it shares (libtorch compiles pytorch's sources).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML

from condapipe.facts.families import family_facts, known_packages

KINDS = ("cpu", "cuda")


@cache
def _default() -> dict[str, Any]:
    """What a package of no family gets (a recipe dir's package)."""
    text = resources.files("condapipe.data").joinpath("compile_jobs.yaml").read_text(encoding="utf-8")
    return dict(YAML(typ="safe").load(text)["default"])


def _figure(package: str) -> dict[str, Any]:
    seen: list[str] = []
    while package in known_packages():
        raw = family_facts(package).get("compile_job_gib")
        if raw is None:  # a family that states none (a script family) gets what a recipe dir gets
            break
        if not isinstance(raw, str):
            if not isinstance(raw, dict) or set(raw) != set(KINDS):
                raise ValueError(f"{package}: compile_job_gib must map {' and '.join(KINDS)} to a figure")
            return raw
        if raw in seen:
            raise ValueError(f"{package}: compile_job_gib names a loop of families: {seen}")
        seen.append(raw)
        package = raw
    return _default()


def _by_version(rows: Any, version: str | None, package: str) -> float:
    if isinstance(rows, (int, float)):
        return float(rows)
    try:
        parsed = Version(version) if version else None
    except InvalidVersion:
        parsed = None
    for row in rows:
        try:
            matches = parsed is None or parsed in SpecifierSet(str(row["versions"]))
        except InvalidSpecifier as exc:
            raise ValueError(f"{package}: compile_job_gib versions {row['versions']!r} is no range") from exc
        if matches:
            return float(row["gib"])
    raise ValueError(f"{package}: compile_job_gib has no row for version {version}")


def compile_job_gib(package: str, version: str | None, *, cuda: bool) -> float:
    """GiB one compile job of `package` (release `version`) needs, for a CUDA or a CPU variant."""
    return _by_version(_figure(package)["cuda" if cuda else "cpu"], version, package)


def spec_job_gib(package: str, version: str | None, cuda_flags: Iterable[bool]) -> float:
    """The figure for a build of several variants at once: its largest (one MAX_JOBS serves all)."""
    return max((compile_job_gib(package, version, cuda=c) for c in set(cuda_flags)), default=0.0) or (
        compile_job_gib(package, version, cuda=False)
    )

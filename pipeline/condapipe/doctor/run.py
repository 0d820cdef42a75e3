"""Preflight: will this machine build what was asked? Answered in seconds, not after 6 hours.

`condapipe doctor` (and every `condapipe build`) looks at the toolchain, memory, disk, cuDNN and
driver against the spec and says, for each finding, how to fix it. Blocking findings stop a
build before it starts (exit 3) unless --force. Everything doctor reads comes through `Machine`,
so tests can fake a machine (a PATH with a stand-in nvcc, a tiny /proc/meminfo) while the
commands themselves still run for real.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.defaults import FoundToolkit
from condapipe.doctor import checks
from condapipe.doctor.machine import Finding, Machine, doctor_data
from condapipe.errors import EnvironmentProblem


@dataclass(frozen=True)
class DoctorReport:
    """All findings, plus what the build should use because of them (MAX_JOBS, toolkit paths)."""

    findings: tuple[Finding, ...]
    build_env: tuple[tuple[str, str], ...] = ()
    cuda_homes: tuple[tuple[str, str], ...] = ()  # CUDA version -> toolkit root to build with

    @property
    def blocking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == "block")

    @property
    def unforceable(self) -> tuple[Finding, ...]:
        """Blocking findings --force cannot get past (the build could not run at all)."""
        return tuple(f for f in self.blocking if not f.forceable)

    def stops(self, force: bool) -> bool:
        """Whether the build stops here: a blocking finding, unless forced past the forceable ones."""
        return bool(self.unforceable) or (bool(self.blocking) and not force)

    @property
    def max_jobs(self) -> int | None:
        value = dict(self.build_env).get("MAX_JOBS")
        return int(value) if value else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": not self.blocking,
            "blocking": len(self.blocking),
            "findings": [f.to_dict() for f in self.findings],
            "build_env": dict(self.build_env),
            "cuda_homes": dict(self.cuda_homes),
        }

    def raise_if_blocking(
        self, *, force: bool = False, before_build: bool = True, doctor_command: str = "condapipe doctor"
    ) -> None:
        """EnvironmentProblem (exit 3) naming the first blocking finding, unless forced.

        `doctor_command`: the doctor command that checks the same target as the build (the hint)."""
        if not self.stops(force):
            return
        first = (self.unforceable or self.blocking)[0]
        more = len(self.blocking) - 1
        if before_build:
            extra = f" (+{more} more)" if more else ""
            anyway = "" if self.unforceable else ", --force builds anyway"
            raise EnvironmentProblem(
                f"preflight: {first.message}{extra}; `{doctor_command}` checks this target again{anyway}",
                fix=first.fix,
            )
        extra = f" (+{more} more above)" if more else ""
        raise EnvironmentProblem(f"{first.message}{extra}", fix=first.fix)


def run_doctor(
    spec: BuildSpec, machine: Machine, *, engine: str = "auto", variants_to_build: int | None = None
) -> DoctorReport:
    """Every check, in a stable order; never raises for what it finds, only reports.

    On a machine that cannot build the platform at all, only the checks that still matter there
    run (the destinations): advice to install a toolkit or cuDNN that could never be used is noise."""
    findings: list[Finding] = []
    env: dict[str, str] = {}
    homes: dict[str, str] = {}
    foreign = False
    for check in checks.ALL:
        if foreign and check not in checks.HOST_INDEPENDENT:
            continue
        result = check(spec, machine, engine=engine, variants=variants_to_build)
        foreign = foreign or any(not f.forceable for f in result.findings if f.level == "block")
        findings.extend(result.findings)
        env.update(result.env)
        homes.update(result.cuda_homes)
    return DoctorReport(tuple(findings), tuple(sorted(env.items())), tuple(sorted(homes.items())))


def find_toolkits(machine: Machine) -> tuple[FoundToolkit, ...]:
    """The CUDA toolkits this machine has: the nvcc on PATH, then each <cuda_roots>/cuda-X.Y/bin/nvcc.

    What the spec stage's defaults (condapipe.buildspec.defaults) infer --cuda from; each version is
    what that nvcc reports, not what its folder is called.
    """
    found: list[FoundToolkit] = []
    nvcc = machine.which("nvcc")
    version = checks.nvcc_version(nvcc, machine) if nvcc else None
    if nvcc and version:
        found.append(FoundToolkit(version, nvcc, on_path=True))
    roots = sorted(machine.cuda_roots.glob("cuda-*")) if machine.cuda_roots.is_dir() else []
    for root in roots:
        alt = root / "bin" / "nvcc"
        alt_version = checks.nvcc_version(str(alt), machine) if alt.is_file() else None
        if alt_version:
            found.append(FoundToolkit(alt_version, str(root), on_path=False))
    return tuple(found)


def default_target() -> str:
    """The family `condapipe doctor` checks the machine for when no package is named (doctor.yaml)."""
    return str(doctor_data()["default_target"])

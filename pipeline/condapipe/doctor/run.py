"""Preflight: will this machine build what was asked? Answered in seconds, not after 6 hours.

`condapipe doctor` (and every `condapipe build`) looks at the toolchain, memory, disk, cuDNN and
driver against the spec and says, for each finding, how to fix it. Blocking findings stop a
build before it starts (exit 3) unless --force. Everything doctor reads comes through `Machine`,
so tests can fake a machine (a PATH with a stand-in nvcc, a tiny /proc/meminfo) while the
commands themselves still run for real.
"""

from __future__ import annotations

import os
import platform as _platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from condapipe.errors import EnvironmentProblem
from condapipe.spec.build_spec import BuildSpec

LEVELS = ("ok", "info", "warn", "block")

# Overrides for faking a machine (tests, or checking a build host's numbers from elsewhere).
MEMINFO_ENV = "CONDAPIPE_MEMINFO"  # path read instead of /proc/meminfo
MACHINE_ARCH_ENV = "CONDAPIPE_MACHINE_ARCH"  # machine architecture reported instead of uname -m
DRIVER_FILE_ENV = "CONDAPIPE_DRIVER_VERSION_FILE"  # instead of /proc/driver/nvidia/version
CUDA_ROOTS_ENV = "CONDAPIPE_CUDA_ROOTS"  # where cuda-X.Y toolkits live, instead of /usr/local


@dataclass(frozen=True)
class Finding:
    """One fact about the machine; warn/block findings always carry a fix."""

    check: str  # platform | nvcc | gcc | driver | ram | disk | cudnn | cmake | engine
    level: str  # ok | info | warn | block
    message: str
    fix: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"unknown level {self.level}")
        if self.level in ("warn", "block") and not self.fix:
            raise ValueError(f"{self.check}: a {self.level} finding needs a fix")

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "level": self.level,
            "message": self.message,
            "fix": self.fix,
            **self.data,
        }


@dataclass(frozen=True)
class Machine:
    """Where doctor looks. `from_environ` is the real machine; tests pass their own."""

    path: str  # PATH used to find nvcc, gcc, cmake
    meminfo: Path = Path("/proc/meminfo")
    driver_file: Path = Path("/proc/driver/nvidia/version")
    cuda_roots: Path = Path("/usr/local")
    cpu_count: int = 1
    work_dir: Path = Path(".condapipe")
    env: Mapping[str, str] = field(default_factory=dict)
    arch: str = "x86_64"  # platform.machine() of the build machine

    @classmethod
    def from_environ(cls, work_dir: Path, environ: Mapping[str, str] | None = None) -> Machine:
        env = dict(os.environ if environ is None else environ)
        return cls(
            path=env.get("PATH", os.defpath),
            meminfo=Path(env.get(MEMINFO_ENV, "/proc/meminfo")),
            driver_file=Path(env.get(DRIVER_FILE_ENV, "/proc/driver/nvidia/version")),
            cuda_roots=Path(env.get(CUDA_ROOTS_ENV, "/usr/local")),
            cpu_count=len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1),
            work_dir=work_dir,
            env=env,
            arch=env.get(MACHINE_ARCH_ENV) or _platform.machine(),
        )

    def which(self, tool: str) -> str | None:
        return shutil.which(tool, path=self.path)


def _cpu_count() -> int:
    """CPUs this process may use (a container's cpuset, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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

    def raise_if_blocking(self, *, force: bool = False, before_build: bool = True) -> None:
        """EnvironmentProblem (exit 3) naming the first blocking finding, unless forced."""
        if not self.blocking or force:
            return
        first = self.blocking[0]
        more = len(self.blocking) - 1
        if before_build:
            extra = f" (+{more} more: `condapipe doctor` lists them)" if more else ""
            raise EnvironmentProblem(
                f"preflight: {first.message}{extra}; --force builds anyway", fix=first.fix
            )
        extra = f" (+{more} more above)" if more else ""
        raise EnvironmentProblem(f"{first.message}{extra}", fix=first.fix)


@cache
def doctor_data() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("doctor.yaml").read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


def family_facts(package: str) -> dict[str, Any]:
    data = doctor_data()
    return {**data["default_family"], **data["families"].get(package, {})}


def run_doctor(
    spec: BuildSpec, machine: Machine, *, engine: str = "auto", variants_to_build: int | None = None
) -> DoctorReport:
    """Every check, in a stable order; never raises for what it finds, only reports."""
    from condapipe.doctor import checks as checks

    findings: list[Finding] = []
    env: dict[str, str] = {}
    homes: dict[str, str] = {}
    for check in checks.ALL:
        result = check(spec, machine, engine=engine, variants=variants_to_build)
        findings.extend(result.findings)
        env.update(result.env)
        homes.update(result.cuda_homes)
    return DoctorReport(tuple(findings), tuple(sorted(env.items())), tuple(sorted(homes.items())))

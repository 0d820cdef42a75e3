"""What doctor looks at and what it says: the Machine (faked in tests), one Finding per fact, its tables.

Shared by the checks and the runner (condapipe.doctor.run), below both of them.
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

from condapipe.facts.families import DoctorNeeds, profile
from condapipe.process_settings import CUDA_ROOTS_ENV, DRIVER_FILE_ENV, MACHINE_ARCH_ENV, MEMINFO_ENV
from condapipe.safe_paths import env_file

LEVELS = ("ok", "info", "warn", "block")
FACTS_MAX_BYTES = 1 << 16  # /proc/meminfo and the driver's version file are a few KiB

# Overrides for faking a machine (tests, or checking a build host's numbers from elsewhere) are
# declared in condapipe.process_settings.STAGE_ENVIRONMENT and read from the command's environ.


@dataclass(frozen=True)
class Finding:
    """One fact about the machine; warn/block findings always carry a fix."""

    check: str  # platform | destinations | nvcc | gcc | driver | ram | disk | cudnn | cmake | engine
    level: str  # ok | info | warn | block
    message: str
    fix: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    # False for a block --force cannot get past (an x86_64 machine cannot build aarch64 packages):
    # the advice then never says "--force builds anyway"
    forceable: bool = True

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
    output_dir: Path | None = None  # the channel a build publishes into (checked for being writable)

    @classmethod
    def from_environ(
        cls, work_dir: Path, environ: Mapping[str, str], *, output_dir: Path | None = None
    ) -> Machine:
        """The machine a build in `environ` (the command's Settings.environ) would run on."""
        env = dict(environ)
        return cls(
            path=env.get("PATH", os.defpath),
            meminfo=env_file(env, MEMINFO_ENV, "/proc/meminfo"),
            driver_file=env_file(env, DRIVER_FILE_ENV, "/proc/driver/nvidia/version"),
            cuda_roots=Path(env.get(CUDA_ROOTS_ENV, "/usr/local")),
            cpu_count=len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1),
            work_dir=work_dir,
            env=env,
            arch=env.get(MACHINE_ARCH_ENV) or _platform.machine(),
            output_dir=output_dir,
        )

    def which(self, tool: str) -> str | None:
        return shutil.which(tool, path=self.path)


@cache
def doctor_data() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("doctor.yaml").read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


def family_needs(package: str) -> DoctorNeeds:
    """What the family's profile says doctor checks a machine against (its `doctor:` section)."""
    return profile(package).doctor

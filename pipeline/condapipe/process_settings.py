"""What the environment sets for every command of this process, read once by the CLI's root command.

The settings cascade (condapipe.buildspec.settings) reads the environment for one command (and
keeps it whole in Settings.environ for doctor, the upload token and the engines; STAGE_ENVIRONMENT
names what the stages read from it); a few
variables matter to libraries below it, whatever the command: the nvidia-smi --arch native asks,
the bounds of every unpacked archive, the progress cadence and the test hooks that pause a plan.
They are declared here, in PROCESS_ENVIRONMENT (part of the settings' ENVIRONMENT table), parsed
once into a frozen ProcessSettings, and put in place with use_process_settings; the libraries
call process() and never read the environment themselves. This module sits at the package root
(it imports only errors) so the root command stays cheap to start and every library may ask it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from condapipe.errors import UsageError


@dataclass(frozen=True)
class EnvSetting:
    """An environment variable the cascade reads, declared beside the flag or config key it stands
    with (as rattler-build's `#[arg(env = ...)]` and cibuildwheel's option table do): the
    environment is read in the cascade and in the engines' process boundary, nowhere else."""

    name: str
    field: str  # the Settings (or ProcessSettings) field it fills
    beside: str  # the flag or config key it stands with ("" for none)
    what: str


# Names the libraries below the settings use in their messages, declared once here.
NVIDIA_SMI_ENV = "CONDAPIPE_NVIDIA_SMI"
MAX_BYTES_ENV = "CONDAPIPE_MAX_UNPACK_BYTES"
MAX_FILES_ENV = "CONDAPIPE_MAX_UNPACK_FILES"
MAX_RATIO_ENV = "CONDAPIPE_MAX_UNPACK_RATIO"
EVERY_ENV = "CONDAPIPE_PROGRESS_EVERY"
PAUSE_ENV = "CONDAPIPE_TEST_PAUSE"
PAUSE_FILE_ENV = "CONDAPIPE_TEST_PAUSE_FILE"

# Read by a stage from the command's Settings.environ (the whole environment the command runs in),
# named here so the stage and the table share one declaration.
TOKEN_ENV_VARS: tuple[str, ...] = ("BINSTAR_API_TOKEN", "ANACONDA_API_TOKEN")  # anaconda-client's order
MEMINFO_ENV = "CONDAPIPE_MEMINFO"
MACHINE_ARCH_ENV = "CONDAPIPE_MACHINE_ARCH"
DRIVER_FILE_ENV = "CONDAPIPE_DRIVER_VERSION_FILE"
CUDA_ROOTS_ENV = "CONDAPIPE_CUDA_ROOTS"

STAGE_ENVIRONMENT: tuple[EnvSetting, ...] = (
    EnvSetting(
        TOKEN_ENV_VARS[0],
        "environ",
        "--token-file (upload)",
        "the anaconda.org token, first in anaconda-client's order (never printed or passed in argv)",
    ),
    EnvSetting(
        TOKEN_ENV_VARS[1],
        "environ",
        "--token-file (upload)",
        "the anaconda.org token when BINSTAR_API_TOKEN is unset (never printed or passed in argv)",
    ),
    EnvSetting(MEMINFO_ENV, "environ", "doctor", "a file doctor reads instead of /proc/meminfo"),
    EnvSetting(
        MACHINE_ARCH_ENV, "environ", "doctor", "the machine architecture doctor reports instead of uname -m"
    ),
    EnvSetting(
        DRIVER_FILE_ENV, "environ", "doctor", "a file doctor reads instead of /proc/driver/nvidia/version"
    ),
    EnvSetting(
        CUDA_ROOTS_ENV, "environ", "doctor", "where doctor looks for cuda-X.Y toolkits instead of /usr/local"
    ),
)

PROCESS_ENVIRONMENT: tuple[EnvSetting, ...] = (
    EnvSetting(
        NVIDIA_SMI_ENV,
        "nvidia_smi",
        "--arch native",
        "the nvidia-smi that --arch native asks for the local GPUs' compute capabilities",
    ),
    EnvSetting(
        MAX_BYTES_ENV,
        "unpack_max_bytes",
        "",
        "bytes one package, wheel or source archive may expand to (default: package/safe_extract.py's)",
    ),
    EnvSetting(
        MAX_FILES_ENV,
        "unpack_max_files",
        "",
        "members one package, wheel or source archive may hold (default: package/safe_extract.py's)",
    ),
    EnvSetting(
        MAX_RATIO_ENV,
        "unpack_max_ratio",
        "",
        "how many times its own size an archive may expand to (default: package/safe_extract.py's)",
    ),
    EnvSetting(
        EVERY_ENV,
        "progress_every",
        "",
        "seconds between the progress lines of a build whose output is no terminal (>= 1, default 30)",
    ),
    EnvSetting(
        PAUSE_ENV,
        "pause_points",
        "",
        "test hook: comma-separated points where a plan stops so a test can kill it there",
    ),
    EnvSetting(
        PAUSE_FILE_ENV,
        "pause_file",
        "",
        "test hook: the file a paused plan appends the point's name to",
    ),
)


@dataclass(frozen=True)
class ProcessSettings:
    """The PROCESS_ENVIRONMENT variables, parsed; the defaults are what an unset variable means."""

    nvidia_smi: str = "nvidia-smi"  # CONDAPIPE_NVIDIA_SMI
    unpack_max_bytes: int | None = None  # CONDAPIPE_MAX_UNPACK_BYTES (None: the archive kind's default)
    unpack_max_files: int | None = None  # CONDAPIPE_MAX_UNPACK_FILES
    unpack_max_ratio: int | None = None  # CONDAPIPE_MAX_UNPACK_RATIO
    progress_every: float | None = None  # CONDAPIPE_PROGRESS_EVERY (None: the display's default)
    pause_points: tuple[str, ...] = ()  # CONDAPIPE_TEST_PAUSE
    pause_file: str | None = None  # CONDAPIPE_TEST_PAUSE_FILE


def _whole_number(environ: Mapping[str, str], name: str) -> int | None:
    """A positive whole number: None when unset; a UsageError naming the variable otherwise."""
    text = (environ.get(name) or "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"${name} must be a whole number, not {text[:40]!r}") from None
    if value <= 0:
        raise UsageError(f"${name} must be positive, not {text!r}")
    return value


def _every(raw: str | None) -> float | None:
    """CONDAPIPE_PROGRESS_EVERY: at least 1 second; unset or unreadable keeps the default (None),
    since a cosmetic cadence is no reason to stop a build."""
    text = (raw or "").strip()
    try:
        value = float(text) if text else math.nan
    except ValueError:
        return None
    return max(1.0, value) if math.isfinite(value) else None


def process_settings(environ: Mapping[str, str]) -> ProcessSettings:
    """ProcessSettings from `environ` (the root command passes this process's); a bad bound is a
    UsageError naming the variable."""
    pause = environ.get(PAUSE_ENV) or ""
    return ProcessSettings(
        nvidia_smi=(environ.get(NVIDIA_SMI_ENV) or "").strip() or "nvidia-smi",
        unpack_max_bytes=_whole_number(environ, MAX_BYTES_ENV),
        unpack_max_files=_whole_number(environ, MAX_FILES_ENV),
        unpack_max_ratio=_whole_number(environ, MAX_RATIO_ENV),
        progress_every=_every(environ.get(EVERY_ENV)),
        pause_points=tuple(p for p in pause.split(",") if p),
        pause_file=environ.get(PAUSE_FILE_ENV) or None,
    )


_current: list[ProcessSettings] = []


def use_process_settings(settings: ProcessSettings) -> None:
    """Put `settings` in place for the rest of the process (the root command does, before any command)."""
    _current[:] = [settings]


def process() -> ProcessSettings:
    """The process's settings; the defaults until the root command put its own in place."""
    return _current[0] if _current else ProcessSettings()

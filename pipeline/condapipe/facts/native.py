"""`--arch native`: the compute capabilities of the GPUs in this machine, from nvidia-smi.

Building only for the local GPUs is the fastest useful build (one arch instead of eight); the
list must still come from the driver, not a guess, so a machine without a working GPU gets a
clear error instead of a package that has no kernel for the card it will run on.
This module only asks the driver; condapipe.facts.arch turns the answer into archs.
"""

from __future__ import annotations

import shutil
import subprocess

from condapipe.errors import EnvironmentProblem
from condapipe.process_settings import process

NVIDIA_SMI = "nvidia-smi"
QUERY = ("--query-gpu=compute_cap", "--format=csv,noheader")
FIX = "run on a machine with an NVIDIA GPU and driver, or name the archs, e.g. --arch 8.6"


def query_compute_caps(timeout: float = 30.0) -> list[str]:
    """Raw compute capabilities ("8.6", one per GPU) reported by nvidia-smi."""
    exe = shutil.which(process().nvidia_smi)  # CONDAPIPE_NVIDIA_SMI, else nvidia-smi on PATH
    if exe is None:
        raise EnvironmentProblem("--arch native needs nvidia-smi, which is not on PATH", FIX)
    try:
        proc = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"--arch native: running nvidia-smi failed ({exc})", FIX) from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        reason = detail[0] if detail else f"exit status {proc.returncode}"
        raise EnvironmentProblem(f"--arch native: nvidia-smi found no usable GPU ({reason})", FIX)
    caps = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if not caps:
        raise EnvironmentProblem("--arch native: nvidia-smi lists no GPU", FIX)
    return caps

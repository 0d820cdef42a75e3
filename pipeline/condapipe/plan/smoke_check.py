"""The family's smoke check in a new environment: does the installed package work on this machine?

Each family's profile states its check (`env_check:` in recipes/<family>/family.yaml): Python
code run by the environment's python, a program from its bin/, or files that must be there. The
check's exit status says what happened, one protocol for every family: 0 works, 2 works but CUDA
is not available on this machine (no GPU or driver: said plainly, not a failure of the package),
anything else is broken. A CPU-only machine thus learns "CUDA is not available" instead of a
mysterious error.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condapipe.facts.families import family_facts, family_of_package

NO_CUDA_EXIT = 2
CHECK_TIMEOUT_S = 300


@dataclass(frozen=True)
class SmokeResult:
    """One family's check in the environment."""

    family: str
    status: str  # "ok" | "no-cuda" | "failed"
    lines: tuple[str, ...]  # what the check printed (stdout, then stderr)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "status": self.status, "output": list(self.lines)}


def checked_families(names: Iterable[str]) -> tuple[str, ...]:
    """The families of the requested packages that state a check, in order, each once."""
    out: list[str] = []
    for name in names:
        family = family_of_package(name)
        if family and family not in out and family_facts(family).get("env_check"):
            out.append(family)
    return tuple(out)


def _status(code: int) -> str:
    return "ok" if code == 0 else "no-cuda" if code == NO_CUDA_EXIT else "failed"


def run_smoke_check(prefix: Path, family: str) -> SmokeResult:
    """Run `family`'s env_check in `prefix` (its bin/ first on PATH, no LD_LIBRARY_PATH: the
    libraries must be found the way a user's process finds them)."""
    check = family_facts(family)["env_check"]
    prefix = prefix.absolute()
    files = [str(f) for f in check.get("files") or ()]
    missing = [f for f in files if not (prefix / f).is_file()]
    if files and not check.get("python") and not check.get("argv"):
        lines = [f"missing: {f}" for f in missing] or [f"present: {' '.join(files)}"]
        return SmokeResult(family, "failed" if missing else "ok", tuple(lines))
    if check.get("python"):
        argv = [str(prefix / "bin" / "python"), "-c", str(check["python"])]
    else:
        argv = [str(prefix / "bin" / str(check["argv"][0])), *(str(a) for a in check["argv"][1:])]
    # the process boundary: the child gets this environment, less what would point it elsewhere
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT_S, check=False, cwd=prefix
        )
    except FileNotFoundError:
        return SmokeResult(family, "failed", (f"{argv[0]} is not in the environment",))
    except subprocess.TimeoutExpired:
        return SmokeResult(family, "failed", (f"the check did not finish in {CHECK_TIMEOUT_S} s",))
    lines = [*proc.stdout.splitlines(), *proc.stderr.splitlines()[-15:]]
    return SmokeResult(family, _status(proc.returncode), tuple(line for line in lines if line.strip()))


__all__ = ["NO_CUDA_EXIT", "SmokeResult", "checked_families", "run_smoke_check"]

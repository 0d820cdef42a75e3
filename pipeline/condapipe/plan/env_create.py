"""An environment from the built channel, made with py-rattler: the last step of a user's journey.

`conda install -c file://…` needs conda; py-rattler (already what resolves every build) solves and
installs without it. The channels are searched in the build's order: the output dir first (a
package built here wins), then the dependency channels (conda-forge by default).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condapipe.errors import EnvironmentProblem, UsageError


@dataclass(frozen=True)
class EnvRequest:
    """What `condapipe env` was asked: packages into a prefix, from channels in search order."""

    prefix: Path
    specs: tuple[str, ...]  # match specs: "pytorch", "cuda-smoke ==1.0.0"
    channels: tuple[str, ...]  # the output dir first
    cache_dir: Path  # downloaded and extracted packages (in the work dir, so `condapipe clean` finds it)


def check_prefix(prefix: Path) -> None:
    """A prefix is a new or empty folder, or an existing environment (conda-meta/): never a folder
    of the user's other files, which installing would mix packages into."""
    if prefix.is_symlink() or (prefix.exists() and not prefix.is_dir()):
        raise UsageError(f"{prefix}: not a directory; name a new folder for the environment")
    if prefix.is_dir() and any(prefix.iterdir()) and not (prefix / "conda-meta").is_dir():
        raise UsageError(f"{prefix}: a folder that is not an environment; name a new folder (-p DIR)")


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:400] or type(exc).__name__


def solve_env(request: EnvRequest) -> list[Any]:
    """The records the environment would hold (a dry run stops here); exit 3 when they do not solve."""
    import rattler
    from rattler.exceptions import GatewayError, SolverError

    from condapipe.plan.build_channels import gateway

    platform = str(rattler.Subdir.current())

    async def run() -> list[Any]:
        return await rattler.solve(
            [rattler.Channel(c) for c in request.channels],
            list(request.specs),
            gateway=gateway(),
            platforms=[rattler.Subdir(platform), rattler.Subdir("noarch")],
            virtual_packages=rattler.VirtualPackage.detect(),
        )

    try:
        return asyncio.run(run())
    except (SolverError, GatewayError) as exc:
        raise EnvironmentProblem(
            f"cannot make the environment from {', '.join(request.channels)}: {_first_line(exc)}",
            "build the package into --output-dir first, or add the channel that has its dependencies (-c)",
        ) from None
    except ValueError as exc:  # a spec py-rattler cannot parse
        raise UsageError(f"cannot read the package spec: {_first_line(exc)}") from None


def install_env(request: EnvRequest, records: list[Any]) -> tuple[str, ...]:
    """Install `records` into the prefix (py-rattler's transaction); name=version=build of each."""
    import rattler

    check_prefix(request.prefix)
    request.cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        asyncio.run(
            rattler.install(records, request.prefix, cache_dir=request.cache_dir, show_progress=False)
        )
    except OSError:
        raise
    except Exception as exc:  # py-rattler's install errors (InstallerError, LinkError, …)
        raise EnvironmentProblem(
            f"cannot install into {request.prefix}: {_first_line(exc)}",
            "check the folder can be written and has free space",
        ) from None
    return record_lines(records)


def record_lines(records: list[Any]) -> tuple[str, ...]:
    """ "name=version=build" of each record, sorted: what the environment holds."""
    return tuple(sorted(f"{r.name.normalized}={r.version}={r.build}" for r in records))


__all__ = ["EnvRequest", "check_prefix", "install_env", "record_lines", "solve_env"]

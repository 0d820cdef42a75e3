"""Can the engine download each source this plan builds from? Asked before building, dry run or not.

A magma tarball on a host this machine cannot reach used to pass the dry run and fail the build
(exit 1, after the engine's retries). Each remote source the plan would fetch is probed once, with
the channel timeout: an HTTP(S) tarball by a one-byte ranged GET, a git https URL by its
smart-HTTP ref advertisement (what `git clone` asks first). `--offline` needs no probe: a remote
source cannot be fetched offline. What cannot be fetched is an EnvironmentProblem (exit 3) whose
fix is render.source_check.source_advice (the URL, its sha256, `--source DIR|TARBALL`).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.errors import EnvironmentProblem
from condapipe.plan.build_channels import channel_timeout
from condapipe.plan.runner import Plan, describe
from condapipe.render.source_check import source_advice


@dataclass(frozen=True)
class SourceProblem:
    """A source the plan would fetch and cannot: which job, the URL, why, and the fix."""

    job: str
    url: str
    why: str
    fix: str

    def line(self) -> str:
        return f"source of {self.job} cannot be downloaded: {self.url} ({self.why}) — fix: {self.fix}"


def _probe_url(spec: BuildSpec) -> str | None:
    """The URL that tells whether the source can be fetched, or None for a local source."""
    src = spec.source
    if src.kind == "url" and src.url and src.url.startswith(("http://", "https://")):
        return src.url
    if src.kind == "git" and src.url and src.url.startswith("https://"):
        return src.url.removesuffix("/").removesuffix(".git") + ".git/info/refs?service=git-upload-pack"
    return None


def _unreachable(url: str, timeout: float) -> str | None:
    """Why `url` cannot be fetched (one short phrase), or None when the server answers with data."""
    request = urllib.request.Request(url, headers={"Range": "bytes=0-0", "User-Agent": "condapipe"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(1)
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} {exc.reason}"
    except urllib.error.URLError as exc:
        reason = exc.reason
        return str(getattr(reason, "strerror", None) or reason)
    except (OSError, ValueError) as exc:  # timeouts, resets, a malformed answer
        return str(getattr(exc, "strerror", None) or exc) or type(exc).__name__
    return None


def source_problems(plan: Plan, *, offline: bool) -> list[SourceProblem]:
    """The remote sources of the jobs this run would build that cannot be downloaded."""
    pending = {row["id"] for row in describe(plan) if row["action"] == "run"}
    problems: list[SourceProblem] = []
    seen: dict[str, str | None] = {}
    for job in plan.jobs:
        if job.spec is None or f"build:{job.label}" not in pending:
            continue
        url = _probe_url(job.spec)
        if url is None:
            continue
        shown = job.spec.source.url or url
        if offline:
            why: str | None = "--offline: a remote source needs the network"
        else:
            if url not in seen:
                seen[url] = _unreachable(url, channel_timeout())
            why = seen[url]
        if why:
            problems.append(SourceProblem(job.label, shown, why, source_advice(job.spec)))
    return problems


def raise_source_problems(problems: list[SourceProblem]) -> None:
    """Exit 3 naming the first source that cannot be downloaded and how to hand it over."""
    if not problems:
        return
    first = problems[0]
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    raise EnvironmentProblem(
        f"the source of {first.job} cannot be downloaded: {first.url} ({first.why}){more}", fix=first.fix
    )


__all__ = ["SourceProblem", "raise_source_problems", "source_problems"]

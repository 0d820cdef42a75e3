"""Resolve first: every build, host and test environment of a plan, solved before anything compiles.

A multi-hour build must not stop at its first dependency, or at its test after the compile. So the
plan's recipes are rendered the way rattler-build renders them (py-rattler-build's Stage0Recipe:
selectors, variants and the variant pins of bare names, e.g. `python` -> `python =3.11`), and each
environment is solved with py-rattler's solver (`rattler.solve`, repodata through rattler's
gateway) against the channels the engine will search. Packages the plan itself builds first
(magma-cudaXY for pytorch) are offered to the solver as "planned" records, so a pytorch host env
that needs this plan's magma resolves before magma is built.

A failure names each missing package, the environment that needs it, every channel searched with
whether it answered, and the fix (data/channels.yaml). A remote channel that could not be reached
is never reported as "not found": when a package is missing and a remote channel was down, the
network is the cause named.
"""

from __future__ import annotations

import asyncio
import datetime
import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from condapipe.errors import EnvironmentProblem
from condapipe.plan.build_channels import ChannelStatus, channel_data, gateway
from condapipe.plan.environments import Environment, RecipeFacts, render_job, spec_name

if TYPE_CHECKING:
    from condapipe.plan.runner import Plan

PLANNED_CHANNEL = "file:///condapipe-planned"  # the channel the solver names for planned records
_SOLVE_TIMEOUT = datetime.timedelta(seconds=120)
GENERIC_FIX = "add a channel that has it (-c), or build it first into the --output-dir"


@dataclass(frozen=True)
class Solved:
    """A solved environment: (name, version, build, channel) of each package, sorted by name."""

    env: Environment
    records: tuple[tuple[str, str, str, str], ...]

    def key_versions(self, patterns: Sequence[str]) -> list[str]:
        return [
            f"{name} {version}" + (" (built by this plan)" if channel == PLANNED_CHANNEL else "")
            for name, version, _, channel in self.records
            if any(fnmatch.fnmatchcase(name, p) for p in patterns)
        ]


@dataclass(frozen=True)
class Missing:
    """A requirement no channel searched has."""

    name: str
    spec: str
    needed_by: tuple[str, ...]  # "pytorch-2.4.1-py3.11-cuda12.4 (host)", ...
    fix: str


@dataclass(frozen=True)
class Resolution:
    """The outcome of resolving a plan: solved environments, or what is missing and why."""

    channels: tuple[ChannelStatus, ...]
    recipes: tuple[RecipeFacts, ...] = ()
    solved: tuple[Solved, ...] = ()
    missing: tuple[Missing, ...] = ()
    conflicts: tuple[tuple[str, str], ...] = ()  # (environment, the solver's message)
    notes: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # jobs whose recipes the resolver does not read (meta.yaml only)
    fixes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.conflicts

    def summary_lines(self) -> list[str]:
        """What --dry-run shows: channels, then per job its source and key versions per environment."""
        keys = list(channel_data()["key_packages"])
        lines = ["channels searched (in order):"]
        lines += [f"  {c.describe()}" for c in self.channels]
        lines += [f"  note: {note}" for note in self.notes]
        by_job: dict[str, list[Solved]] = {}
        for solved in self.solved:
            by_job.setdefault(solved.env.job, []).append(solved)
        for facts in self.recipes:
            lines.append(f"{facts.job}: source {facts.source}")
            for solved in by_job.pop(facts.job, []):  # a job of several variants: shown once
                shown = solved.key_versions(keys)
                count = len(solved.records)
                versions = ", ".join(shown) if shown else "no key packages"
                lines.append(f"  {solved.env.kind} env ({count} packages): {versions}")
        lines += [f"{job}: recipe.yaml absent; conda-build solves meta.yaml itself" for job in self.skipped]
        return lines

    def _down(self) -> list[ChannelStatus]:
        return [c for c in self.channels if c.state == "unreachable"]

    def problem(self) -> EnvironmentProblem:
        """The one-line error a failed resolution raises (exit 3): what is missing, for what, from
        which channels (and which of them did not answer), and every fix."""
        parts = []
        if self.missing:
            where = "the channels that answered" if self._down() else "the channels searched"
            names = ", ".join(f"{m.spec} ({', '.join(m.needed_by)})" for m in self.missing)
            count = f"{len(self.missing)} package{'s are' if len(self.missing) != 1 else ' is'}"
            parts.append(f"{count} in none of {where}: {names}")
        for env, message in self.conflicts:
            parts.append(f"{env} cannot be solved: {message}")
        searched = ", ".join(c.describe() for c in self.channels)
        return EnvironmentProblem(
            "dependencies do not resolve, nothing was built: "
            + "; ".join(parts)
            + f" — channels: {searched}",
            fix="; ".join(self.fixes) or None,
        )

    def detail_lines(self) -> list[str]:
        """Short lines for the console before the error: channels that did not answer, then the
        missing packages grouped by their fix."""
        lines = [f"channel did not answer: {c.url} ({c.detail})" for c in self._down()]
        by_fix: dict[str, list[Missing]] = {}
        for m in self.missing:
            by_fix.setdefault(m.fix, []).append(m)
        for fix, group in by_fix.items():
            names = ", ".join(m.spec for m in group)
            lines.append(f"missing: {names} — fix: {fix}")
        lines += [f"cannot solve {env}: {message}" for env, message in self.conflicts]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "channels": [c.to_dict() for c in self.channels],
            "environments": [
                {
                    "job": s.env.job,
                    "kind": s.env.kind,
                    "platform": s.env.platform,
                    "specs": list(s.env.specs),
                    "packages": [
                        {"name": n, "version": v, "build": b, "channel": c} for n, v, b, c in s.records
                    ],
                }
                for s in self.solved
            ],
            "sources": {f.job: f.source for f in self.recipes},
            "missing": [
                {"name": m.name, "spec": m.spec, "needed_by": list(m.needed_by), "fix": m.fix}
                for m in self.missing
            ],
            "conflicts": [{"environment": e, "message": m} for e, m in self.conflicts],
            "notes": list(self.notes),
            "fixes": list(self.fixes),
        }


# ---------------------------------------------------------------- packages the plan builds


class PlannedPackages:
    """A py-rattler RepoDataSource of the packages this plan builds before they are needed, so an
    environment that needs one (pytorch's host env needs magma-cudaXY) solves before it exists."""

    def __init__(self, facts: Iterable[RecipeFacts]) -> None:
        import rattler

        self._records: dict[tuple[str, str], list[Any]] = {}
        for f in facts:
            record = rattler.PackageRecord(
                name=f.package,
                version=f.version,
                build=rattler.BuildString(f.build_string),
                build_number=0,
                subdir=f.platform,
                depends=list(f.run),
            )
            file_name = f"{f.package}-{f.version}-{f.build_string}.conda"
            repo = rattler.RepoDataRecord(
                record, file_name, f"{PLANNED_CHANNEL}/{file_name}", PLANNED_CHANNEL
            )
            self._records.setdefault((f.platform, f.package), []).append(repo)

    def __bool__(self) -> bool:
        return bool(self._records)

    def names(self) -> set[str]:
        return {name for _, name in self._records}

    async def fetch_package_records(self, platform: Any, name: Any) -> list[Any]:
        return list(
            self._records.get(
                (str(platform), name.normalized if hasattr(name, "normalized") else str(name)), []
            )
        )

    def package_names(self, platform: Any) -> list[str]:
        return sorted({name for plat, name in self._records if plat == str(platform)})


# ---------------------------------------------------------------- solving


def _sibling(facts: RecipeFacts, env: Environment) -> bool:
    """Another output of the same recipe: the engine builds it in the same run (in the order its
    pins need), so it is there for this output's environments; a package never builds itself."""
    return facts.job == env.job and bool(env.package) and facts.package != env.package


def _channel_of(record: Any) -> str:
    channel = str(getattr(record, "channel", "") or "")
    return channel.rstrip("/")


def _virtual_packages(platform: str, build_platform: str) -> list[Any]:
    import rattler

    detected = rattler.VirtualPackage.detect()
    if platform in (build_platform, "noarch"):
        return detected
    # Another target (linux-aarch64 from linux-64): the OS packages apply, this CPU's archspec does not.
    return [v for v in detected if "Archspec" not in repr(v)]


async def _available_names(gw: Any, sources: list[Any], platform: str, names: set[str]) -> set[str]:
    """The names among `names` that some source has (for `platform` or noarch), without solving."""
    result = await gw.query(sources, [platform, "noarch"], sorted(names), recursive=False)
    found: set[str] = set()
    for per_source in result:
        for record in per_source:
            found.add(record.name.normalized)
    return found


def _fix_for(name: str, down: Sequence[ChannelStatus] = (), *, tools_in_use: bool = False) -> str:
    """The fix data/channels.yaml names for `name`; else, when a remote channel did not answer,
    the network (it may well have the package), else the generic advice. With the --build-tools
    wheels channel already in use, "--build-tools wheels" is no fix: it was given."""
    for entry in channel_data()["missing_fixes"]:
        if tools_in_use and str(entry["fix"]).startswith("--build-tools wheels"):
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in entry["names"]):
            return str(entry["fix"])
    if down:
        return _network_fix(down)
    return GENERIC_FIX


def _network_fix(down: Sequence[ChannelStatus]) -> str:
    return (
        f"connect this machine to the network ({', '.join(c.url for c in down)} did not answer), "
        "or build offline: --offline with the dependencies in a local channel (-c DIR)"
    )


def _channel_fixes(channels: Sequence[ChannelStatus], offline_dropped: Sequence[str]) -> list[str]:
    """The channel advice that goes with missing packages: the network first when it was down."""
    fixes = []
    down = [c for c in channels if c.state == "unreachable"]
    if down:
        fixes.append(_network_fix(down))
    broken = [c for c in channels if c.state == "error"]
    if broken:
        fixes.append(
            f"check the channel {', '.join(c.url for c in broken)} (it is not a readable conda channel)"
        )
    defaults = [str(c) for c in channel_data()["default_channels"]]
    searched = {c.channel for c in channels} | set(offline_dropped)
    if not down and not any(d in searched or any(s.endswith("/" + d) for s in searched) for d in defaults):
        fixes.append(
            f"add {' '.join('-c ' + d for d in defaults)} (not searched: -c or --offline replaced it)"
        )
    if offline_dropped:
        fixes.append(f"drop --offline to search {', '.join(offline_dropped)} too (needs the network)")
    return fixes


def resolve_plan(
    plan: Plan,
    channels: Sequence[ChannelStatus],
    *,
    run_tests: bool,
    offline_dropped: Sequence[str] = (),
    extra_planned: Sequence[RecipeFacts] = (),
) -> Resolution:
    """Solve every environment of the jobs whose build or test step this run would run (skipped
    prerequisites and finished steps need nothing: an unchanged rerun resolves nothing).

    `channels` are the probed channels in search order, the output dir first; `extra_planned` are
    packages made before the plan runs (the --build-tools wheels channel in a dry run).
    """
    import rattler
    from rattler.exceptions import GatewayError, SolverError

    build_platform = str(rattler.Subdir.current())
    from condapipe.plan.runner import describe

    pending = {row["id"] for row in describe(plan) if row["action"] == "run"}
    building = [job for job in plan.jobs if {f"build:{job.label}", f"test:{job.label}"} & pending]
    recipes: list[RecipeFacts] = []
    skipped: list[str] = []
    for job in building:
        facts = render_job(job, build_platform, run_tests)
        if not facts:
            skipped.append(job.label)
        recipes.extend(facts)
    usable = [c.channel for c in channels if c.usable]
    tools = bool(extra_planned) or any(c.channel.rstrip("/").endswith("/tool-channel") for c in channels)
    unreachable = [c for c in channels if c.state == "unreachable"]
    down = unreachable
    notes: list[str] = []
    envs = [env for facts in recipes for env in facts.environments]

    # A job's own package is not offered to its own environments: a package cannot build itself.
    missing: dict[str, Missing] = {}
    conflicts: list[tuple[str, str]] = []
    solved: list[Solved] = []
    order = {f.job: i for i, f in enumerate(recipes)}

    async def run() -> None:
        gw = gateway()
        for env in envs:
            earlier = [
                f
                for f in (*extra_planned, *recipes)
                if order.get(f.job, -1) < order[env.job] or _sibling(f, env)
            ]
            planned = PlannedPackages(earlier)
            sources: list[Any] = ([planned] if planned else []) + [rattler.Channel(c) for c in usable]
            # a virtual package (__unix, __glibc) is this machine's, never a channel's: the solver has it
            names = {spec_name(s) for s in env.specs if not spec_name(s).startswith("__")}
            try:
                have = await _available_names(gw, sources, env.platform, names) if sources else set()
            except GatewayError as exc:
                conflicts.append((f"{env.job} ({env.kind})", str(exc).splitlines()[0]))
                continue
            absent = [s for s in env.specs if spec_name(s) in names and spec_name(s) not in have]
            for spec in absent:
                name = spec_name(spec)
                entry = missing.get(name)
                who = f"{env.job} ({env.kind})"
                if entry is None:
                    missing[name] = Missing(name, spec, (who,), _fix_for(name, down, tools_in_use=tools))
                elif who not in entry.needed_by:
                    missing[name] = Missing(name, entry.spec, (*entry.needed_by, who), entry.fix)
            if absent:
                continue
            try:
                records = await rattler.solve(
                    sources,
                    # parsed here, leniently: solve() parses strings strictly, which refuses a
                    # build string with a dot (`pytorch ==2.6.0 py3.12_cuda13.0_cudnn9.28.1_0`, the
                    # pin of a package built against a condapipe pytorch), as conda accepts it
                    [rattler.MatchSpec(spec) for spec in env.specs],
                    gateway=gw,
                    platforms=[rattler.Subdir(env.platform), rattler.Subdir("noarch")],
                    virtual_packages=_virtual_packages(env.platform, build_platform),
                    timeout=_SOLVE_TIMEOUT,
                )
            except (SolverError, GatewayError) as exc:
                conflicts.append((f"{env.job} ({env.kind})", " ".join(str(exc).split())[:600]))
                continue
            rows = sorted((r.name.normalized, str(r.version), str(r.build), _channel_of(r)) for r in records)
            solved.append(Solved(env, tuple(rows)))

    asyncio.run(run())
    fixes: list[str] = []
    if missing or conflicts:
        for m in missing.values():
            if m.fix not in fixes:
                fixes.append(m.fix)
        fixes += [fix for fix in _channel_fixes(channels, offline_dropped) if fix not in fixes]
    elif unreachable:
        notes.append(
            f"{', '.join(c.url for c in unreachable)} did not answer; not needed: every environment "
            "resolved without it, so the build goes on without it"
        )
    return Resolution(
        channels=tuple(channels),
        recipes=tuple(recipes),
        solved=tuple(solved),
        missing=tuple(missing.values()),
        conflicts=tuple(conflicts),
        notes=tuple(notes),
        skipped=tuple(skipped),
        fixes=tuple(fixes),
    )

"""The steps of a package build: render → build → fix → verify → test → publish, per variant.

`make_family_plan` turns a BuildSpec into a Plan (the prerequisites its family profile names
first, one chain of steps per CUDA × Python variant); `make_recipe_plan` does the same for recipe
directories. Packages are built into the work directory, fixed, verified and tested there, and
only then copied into the output channel (temporary name + rename, then re-index), so the
channel never holds a partial or unverified package whatever moment the process dies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from condapipe.buildspec.build_spec import BuildSpec, Source
from condapipe.buildspec.family_specs import planned_specs
from condapipe.errors import UsageError
from condapipe.hashing import hash_file
from condapipe.package.channel_order import search_order
from condapipe.plan import steps as act
from condapipe.plan.build_channels import ChannelTimeout, gateway, within_deadline
from condapipe.plan.code_inputs import code_digest, staged_fix_digest, tree_digest
from condapipe.plan.jobs import Job, PlanOptions
from condapipe.plan.runner import Plan, Step
from condapipe.plan.state import STATE_FILE, StateFile
from condapipe.render.recipe_dir import family_model

# ---------------------------------------------------------------- fingerprints


def source_fingerprint(source: Source) -> dict[str, Any]:
    """What identifies the upstream source: tag/URL+sha256, or for a local checkout its git state."""
    if source.kind != "path" or source.path is None:
        return {"kind": source.kind, "url": source.url, "rev": source.rev, "sha256": source.sha256}
    path = Path(source.path)
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(path), "diff", "HEAD"], capture_output=True, check=True
        ).stdout
        return {"kind": "path", "git": head, "diff": hashlib.sha256(dirty).hexdigest()}
    except (OSError, subprocess.CalledProcessError):
        # Not a git checkout: sizes and mtimes of every file (content hashing a PyTorch tree is slow).
        digest = hashlib.sha256()
        for p in sorted(path.rglob("*")):
            if p.is_file():
                st = p.stat()
                digest.update(f"{p.relative_to(path)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        return {"kind": "path", "files": digest.hexdigest()}


def spec_inputs(spec: BuildSpec) -> dict[str, Any]:
    """The spec as plain JSON data (arch lists in pytorch spelling, paths as strings)."""
    data = dataclasses.asdict(spec)
    data.pop("warnings", None)  # messages about the spec, not part of what gets built
    if not data.get("against"):  # built against nothing in particular: every other spec's inputs
        data.pop("against", None)  # stay what they were before the field existed
    data["cuda_variants"] = [
        {"cuda": v.cuda, "cudnn": v.cudnn, "archs": v.archs.torch_arch_list() if v.archs else None}
        for v in spec.cuda_variants
    ]
    data["source"] = source_fingerprint(spec.source)
    return json.loads(json.dumps(data, default=str))


def _channel_locations(options: PlanOptions) -> list[str]:
    """Channels in use, output first; local ones only when they exist as channels."""
    found = []
    for chan in options.search_channels():
        if "://" not in chan:
            p = Path(chan)
            if not any(p.glob("*/repodata.json")):
                continue  # not a channel (yet): nothing to find there
            chan = str(p.resolve())
        found.append(chan)
    return found


def _current_platform() -> str:
    import rattler

    subdir = getattr(rattler, "Subdir", None) or rattler.Platform  # Platform: py-rattler < 0.28
    return str(subdir.current())


def find_in_channels(name: str, platform: str, options: PlanOptions) -> tuple[str | None, list[str]]:
    """(where `name` was found, notes on channels that could not be queried), using py-rattler."""
    import rattler
    from rattler.exceptions import CacheDirError, FetchRepoDataError, GatewayError, InvalidChannelError

    channels = _channel_locations(options)
    if not channels:
        return None, []
    notes: list[str] = []

    async def query(chan: str) -> list[Any]:
        result = await within_deadline(
            gateway().query(
                [rattler.Channel(chan)],
                [platform, "noarch"],
                [rattler.MatchSpec(name)],
                recursive=False,
            )
        )
        return [rec for per_channel in result for rec in per_channel]

    for chan in channels:
        try:
            records = asyncio.run(query(chan))
        # offline, bad URL, not a channel: the prerequisite is then built
        except (GatewayError, FetchRepoDataError, InvalidChannelError, CacheDirError, ChannelTimeout) as exc:
            notes.append(f"could not query {chan} for {name}: {str(exc).splitlines()[0]}")
            continue
        if records:
            best = max(records, key=lambda r: r.version)
            return f"{name} {best.version} is in {chan}", notes
    return None, notes


# ---------------------------------------------------------------- jobs → steps


def family_jobs(
    spec: BuildSpec, companions: Sequence[str] = (), companion_sources: Mapping[str, str] | None = None
) -> list[Job]:
    """The jobs of a family build: one per spec buildspec.family_specs resolved (prerequisites once
    per CUDA, one per variant of `spec`, then the companions' (`--with`), each needing the variant of
    `spec` it is built against)."""
    return [
        Job(
            p.label,
            p.package,
            spec=p.spec,
            prerequisite=p.prerequisite,
            needs_jobs=p.needs,
            platform=spec.platform,
        )
        for p in planned_specs(spec, companions, companion_sources)
    ]


def recipe_name(recipe_dir: Path) -> str:
    """package.name of a v1 recipe.yaml or v0 meta.yaml when it is plain text, else the dir name."""
    for fname in ("recipe.yaml", "meta.yaml"):
        path = recipe_dir / fname
        if not path.is_file():
            continue
        try:
            doc = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        except (YAMLError, OSError, UnicodeDecodeError):
            doc = None  # Jinja-templated v0 recipes are not YAML until rendered
        package = doc.get("package") if isinstance(doc, dict) else None
        name = package.get("name") if isinstance(package, dict) else None
        if isinstance(name, str) and "{" not in name:
            return name
    return recipe_dir.resolve().name


def recipe_jobs(
    recipe_dirs: Sequence[Path],
    prerequisites: Sequence[Path] = (),
    *,
    pythons: tuple[str, ...] = (),
    platform: str | None = None,
    variant_files: tuple[Path, ...] = (),
    env: tuple[tuple[str, str], ...] = (),
) -> list[Job]:
    """Jobs for recipe directories, in order: each consumes every package published before it.

    `pythons` / `platform` / `env` (`condapipe build DIR --python/--platform/--env`, or the config
    file's) apply to `recipe_dirs`."""
    jobs: list[Job] = []
    for d in (*prerequisites, *recipe_dirs):
        if not d.is_dir():
            raise UsageError(f"{d}: no such recipe directory")
    for d in prerequisites:
        jobs.append(Job(recipe_name(d), recipe_name(d), recipe_dir=d.resolve(), prerequisite=True))
    for d in recipe_dirs:
        label = recipe_name(d)
        needs = tuple(j.label for j in jobs)
        jobs.append(
            Job(
                label,
                label,
                recipe_dir=d.resolve(),
                needs_jobs=needs,
                pythons=pythons,
                platform=platform,
                variant_files=variant_files,
                env=env,
            )
        )
    labels = [j.label for j in jobs]
    if len(set(labels)) != len(labels):
        raise UsageError(f"two recipes build the same package: {', '.join(labels)}")
    return jobs


def _published_before(job: Job, options: PlanOptions) -> bool:
    """Whether an earlier run of this plan already published the job's package (unchanged)."""
    state_path = options.work_dir / STATE_FILE
    if not state_path.is_file():
        return False
    rec = StateFile(state_path).get(f"publish:{job.label}")
    return rec is not None and bool(rec.outputs) and rec.outputs_unchanged()


def make_plan_for_jobs(jobs: Sequence[Job], options: PlanOptions, request: dict[str, Any]) -> Plan:
    """Steps for each job; prerequisites found in a channel in use are planned as skipped. Each
    family job's recipe model is built here, once, and carried by the job."""
    jobs = [
        dataclasses.replace(job, model=family_model(job.spec))
        if job.spec is not None and job.model is None
        else job
        for job in jobs
    ]
    steps: list[Step] = []
    notes: list[str] = []
    skipped_jobs: set[str] = set()
    for job in jobs:
        skip = None
        if job.prerequisite and not _published_before(job, options):
            found, query_notes = find_in_channels(job.name, job.platform or _current_platform(), options)
            notes.extend(query_notes)
            if found:
                skip = f"not needed: {found}"
                skipped_jobs.add(job.label)
        steps.extend(_job_steps(job, options, skip, skipped_jobs))
    return Plan(tuple(steps), options.work_dir, options.output_dir, request, tuple(notes), tuple(jobs))


def select_variant(jobs: Sequence[Job], variant: str | None) -> list[Job]:
    """Only the job whose label is `variant` (`condapipe build --variant ID`), or all jobs for None.

    The label is the variant's ID (stable: made from the package, version, CUDA and Python only).
    A selected job's prerequisites are not built with it: their packages come from a channel in
    use (`--channel`, e.g. the artifact of the CI job that built them)."""
    if variant is None:
        return list(jobs)
    chosen = [dataclasses.replace(job, needs_jobs=()) for job in jobs if job.label == variant]
    if not chosen:
        valid = ", ".join(job.label for job in jobs)
        raise UsageError(f"--variant {variant}: not a variant of this plan; valid: {valid}")
    return chosen


def make_family_plan(
    spec: BuildSpec,
    options: PlanOptions,
    variant: str | None = None,
    companions: Sequence[str] = (),
    companion_sources: Mapping[str, str] | None = None,
) -> Plan:
    """The plan for `condapipe build <family> [--with COMPANION]`: prerequisites, then each variant,
    then each companion's variants (or only `variant`)."""
    request: dict[str, Any] = {"package": spec.package, "spec": spec_inputs(spec)}
    if companions:
        request["with"] = list(dict.fromkeys(companions))
    if companion_sources:
        request["with_sources"] = dict(companion_sources)
    if variant is not None:
        request["variant"] = variant
    jobs = family_jobs(spec, companions, companion_sources)
    return make_plan_for_jobs(select_variant(jobs, variant), options, request)


def make_recipe_plan(
    recipe_dirs: Sequence[Path],
    options: PlanOptions,
    *,
    prerequisites: Sequence[Path] = (),
    pythons: tuple[str, ...] = (),
    platform: str | None = None,
    variant_files: tuple[Path, ...] = (),
    env: tuple[tuple[str, str], ...] = (),
) -> Plan:
    """The plan for recipe directories (each published before the next is built): `condapipe build
    DIR` — the same build -> fix -> verify -> test -> publish chain as a family's variants."""
    jobs = recipe_jobs(
        recipe_dirs, prerequisites, pythons=pythons, platform=platform, variant_files=variant_files, env=env
    )
    request = {"recipes": [str(d) for d in recipe_dirs], "prerequisites": [str(d) for d in prerequisites]}
    return make_plan_for_jobs(jobs, options, request)


def _engine_name(job: Job, options: PlanOptions) -> str:
    """The engine that will build the job ("auto" resolved: installing conda-build later rebuilds)."""
    from condapipe.engines import engine_for_recipe, get_engine

    if job.recipe_dir is not None:
        return engine_for_recipe(job.recipe_dir, options.engine)[0].name
    return get_engine(options.engine).name


def _job_steps(job: Job, options: PlanOptions, skip: str | None, skipped_jobs: set[str]) -> list[Step]:
    label = job.label
    steps: list[Step] = []
    build_needs: list[str] = []
    recipe_input: dict[str, Any]
    if job.spec is not None:
        spec = job.spec
        steps.append(
            Step(
                id=f"render:{label}",
                kind="render",
                title=f"render the {spec.package} recipe (both formats)",
                # "code" covers the render modules, data/, and the recipe templates and patches.
                inputs={"spec": spec_inputs(spec), "code": code_digest("render")},
                action=act.render_action(job.model or family_model(spec), spec, label),
                skip_reason=skip,
                package=label,
            )
        )
        build_needs.append(f"render:{label}")
        recipe_input = {"rendered": f"render:{label}"}
    else:
        assert job.recipe_dir is not None
        recipe_input = {"recipe_dir": str(job.recipe_dir), "recipe": tree_digest(job.recipe_dir)}
        if job.variant_files:  # -m files: a changed one rebuilds
            recipe_input["variant_files"] = {str(f): hash_file(f).sha256 for f in job.variant_files}
        if job.env:  # --env / [env]: the build script sees it, so a changed value rebuilds
            recipe_input["env"] = dict(job.env)
    build_needs += [f"publish:{n}" for n in job.needs_jobs if n not in skipped_jobs]
    archs = job.spec.cuda_variants[0].archs if job.spec and job.spec.cuda_variants else None
    pythons = job.spec.pythons if job.spec else job.pythons
    engine = _engine_name(job, options)
    dso_allowlist = _dso_allowlist(job)
    build_inputs = {
        **recipe_input,
        "engine": engine,
        "channels": list(search_order(options.output_dir, options.channels)),
        "package_format": options.package_format,
        # A .conda's level is not the build's: a level changed after the build is the fix step's
        # to apply (condapipe.plan.steps.fix_action); a .tar.bz2's level is the engine's alone.
        "compression_level": None if options.package_format == "conda" else options.compression_level,
        "pythons": list(pythons),
        "platform": job.platform,
    }
    steps.append(
        Step(
            id=f"build:{label}",
            kind="build",
            title=f"build {job.name} with {engine}",
            inputs=build_inputs,
            action=act.build_action(job, options),
            needs=tuple(build_needs),
            skip_reason=skip,
            package=label,
        )
    )
    steps.append(
        Step(
            id=f"fix:{label}",
            kind="fix",
            title="fix rpaths and vendored libraries",
            inputs={"code": code_digest("fix"), "compression": list(act.final_compression(options))},
            action=act.fix_action(
                f"build:{label}", job.spec.package if job.spec else None, options, staged_fix_digest
            ),
            needs=(f"build:{label}",),
            skip_reason=skip,
            package=label,
        )
    )
    steps.append(
        Step(
            id=f"verify:{label}",
            kind="verify",
            title="verify hashes, prefixes, linkage" + (" and CUDA archs" if archs else ""),
            inputs={
                "code": code_digest("verify"),
                "archs": archs.torch_arch_list() if archs else None,
                "allowed_missing": list(dso_allowlist),
            },
            action=act.verify_action(f"fix:{label}", archs, dso_allowlist, _local_channels(options)),
            needs=(f"fix:{label}",),
            skip_reason=skip,
            package=label,
        )
    )
    test_skip = skip or (None if options.run_tests else "tests disabled (--no-test)")
    steps.append(
        Step(
            id=f"test:{label}",
            kind="test",
            title="run the package's tests in a fresh environment",
            inputs={"channels": list(options.channels)},
            action=act.test_action(f"fix:{label}", options),
            needs=(f"fix:{label}", f"verify:{label}"),
            skip_reason=test_skip,
            package=label,
        )
    )
    publish_needs = [f"fix:{label}", f"verify:{label}"] + ([f"test:{label}"] if not test_skip else [])
    steps.append(
        Step(
            id=f"publish:{label}",
            kind="publish",
            title=f"publish into {options.output_dir} and index",
            inputs={"channel": str(options.output_dir.resolve())},
            action=act.publish_action(f"fix:{label}", options),
            needs=tuple(publish_needs),
            skip_reason=skip,
            package=label,
        )
    )
    return steps


def _local_channels(options: PlanOptions) -> tuple[Path, ...]:
    """The output channel and the local -c folders: where run dependencies built earlier live."""
    local = [Path(c) for c in options.channels if "://" not in c and Path(c).is_dir()]
    return tuple(dict.fromkeys(p.resolve() for p in (options.output_dir, *local)))


def _dso_allowlist(job: Job) -> tuple[str, ...]:
    """Libraries the recipe declares as provided by the target system (missing_dso_allowlist), as
    soname globs for verify: e.g. JetPack's libcudart on a Jetson build is linked but not shipped."""
    if job.spec is None:
        return ()
    model = job.model or family_model(job.spec)
    return tuple(sorted({pattern.rsplit("/", 1)[-1] for pattern in model.missing_dso_allowlist}))

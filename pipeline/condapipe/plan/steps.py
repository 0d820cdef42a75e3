"""The bodies of plan steps: each calls one stage module and returns the files it produced.

Every step writes only into its own step directory under the work dir, except publish, which
copies verified packages into the channel through a temporary name and a rename. Stage modules
(render, engines, fix, verify, channel) are imported when a step runs, so planning, --dry-run
and an unchanged rerun never pay for loading them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from condapipe.errors import BuildFailed
from condapipe.plan.runner import StepContext, StepOutcome, pause_point

if TYPE_CHECKING:
    from condapipe.buildspec.build_spec import BuildSpec
    from condapipe.engines.logs import LineSink
    from condapipe.facts.arch import ArchList
    from condapipe.plan.jobs import Job, PlanOptions
    from condapipe.publish.upload_result import FileOutcome
    from condapipe.render.model import RecipeModel

Action = Callable[[StepContext], StepOutcome]


def _packages(ctx: StepContext, step_id: str) -> list[Path]:
    from condapipe.package.io import package_suffix

    pkgs = [p for p in ctx.dep_files(step_id) if package_suffix(p.name)]
    if not pkgs and not skipped_outputs(ctx, step_id):
        raise BuildFailed(f"{ctx.step.id}: {step_id} produced no package")
    return pkgs


def skipped_outputs(ctx: StepContext, step_id: str) -> list[str]:
    """The outputs the recipe skips (`build: skip`), as the build step recorded them and every
    later step passes on: a step with only skipped outputs has nothing to do, and says so."""
    record = ctx.deps.get(step_id)
    skipped = record.data.get("skipped") if record else None
    return [str(s) for s in skipped] if isinstance(skipped, list) else []


def _note_skipped(ctx: StepContext, step_id: str) -> dict[str, list[str]]:
    skipped = skipped_outputs(ctx, step_id)
    for name in skipped:
        ctx.log.write(f"skipped by the recipe (build/skip): {name}; nothing of it is built or published")
    return {"skipped": skipped} if skipped else {}


def render_action(model: RecipeModel, spec: BuildSpec, label: str) -> Action:
    """Write the job's recipe model (built once, when the plan was made) into its recipe dir, once
    its --source is checked on this machine."""

    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.render.recipe_dir import render_model, source_checked

        # One recipe dir per variant job, where users look for rendered recipes.
        result = render_model(source_checked(model, spec), ctx.work_dir / "recipes" / label)
        ctx.log.write(f"rendered {len(result.files)} files into {result.out_dir}")
        return StepOutcome(files=tuple(sorted(result.files)), data={"recipe_dir": str(result.out_dir)})

    return run


def build_action(job: Job, options: PlanOptions) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.engines import BuildOptions, engine_for_recipe

        if job.recipe_dir is not None:
            recipe_dir = job.recipe_dir
        else:
            rec = ctx.deps[f"render:{job.label}"]
            recipe_dir = Path(str(rec.data["recipe_dir"]))
        engine, why = engine_for_recipe(recipe_dir, options.engine)
        # Built packages go to a staging channel inside the step dir; the real channel is only a
        # source of dependencies (prerequisites published by earlier steps) until publish.
        build_options = BuildOptions(
            output_dir=ctx.step_dir / "out",
            work_dir=options.work_dir,
            channels=options.search_channels(),
            pythons=job.spec.pythons if job.spec else job.pythons,
            package_format=options.package_format,
            compression_level=engine_compression_level(options),
            compression_threads=engine_compression_threads(options),
            # The engine tests the package as built; the test step tests it again after fix (what
            # gets published), so a failure only after fix points at the fixer.
            run_tests=options.run_tests,
            pack_from_stage=options.pack_from_stage,
            keep_tree=options.pack_from_stage,  # verify reads the packed payload (moved on by fix)
            target_platform=job.platform,
            variant_files=job.variant_files,
            override_channels=options.override_channels,
            env=tuple(sorted(build_env(job, options).items())),
            echo=_progress_tap(ctx, options.echo),
            log_opened=lambda path: _engine_log_opened(ctx, path),
        )
        from condapipe.package.channel_index import ensure_channel

        # The engines search both; an unindexed local channel fails rattler-build's test step.
        ensure_channel(build_options.output_dir)
        ensure_channel(options.output_dir)
        ctx.log.write(f"engine {engine.name} ({why}); recipe {recipe_dir}")
        try:
            result = engine.build(recipe_dir, build_options)
        except BuildFailed as exc:
            raise with_source_advice(exc, job) from None
        for name in result.skipped:
            ctx.log.write(f"skipped by the recipe (build/skip): {name}")
        data = {
            "engine": engine.name,
            "engine_log": str(result.log_path),
            "recipe_dir": str(recipe_dir),
            # what the fix step compares with the final level (changed after this step: recompress)
            "packed_at": [options.package_format, build_options.compression_level],
        }
        return StepOutcome(
            files=tuple(sorted(result.packages)),
            data={**data, **({"skipped": list(result.skipped)} if result.skipped else {})},
        )

    return run


def _engine_log_opened(ctx: StepContext, path: Path) -> None:
    """The engine's log, named in the step log and shown by the display as soon as it opens."""
    ctx.log.write(f"engine log: {path}")
    ctx.progress.set_log(path)


def _progress_tap(ctx: StepContext, echo: LineSink | None) -> LineSink:
    """Each build-output line to the step's progress ([n/N] of the compile), then to the CLI's echo."""

    def tap(line: str, style: str | None) -> None:
        ctx.progress.line(line)
        if echo is not None:
            echo(line, style)

    return tap


def with_source_advice(exc: BuildFailed, job: Job) -> BuildFailed:
    """A failure to download the source names where it comes from and how to hand it over
    (--source DIR|TARBALL; for magma the https URL and its sha256); other failures pass unchanged."""
    from condapipe.engines.diagnose import load_rules

    title = next(rule.title for rule in load_rules() if rule.id == "source-fetch-failed")
    if not exc.diagnosis or not exc.diagnosis.startswith(title):
        return exc
    if job.spec is not None:
        from condapipe.render.source_check import source_advice

        advice = source_advice(job.spec)
    else:
        advice = f"point the source of {job.recipe_dir} at a local copy (source: path: or url: file://)"
    return BuildFailed(exc.message, diagnosis=f"{exc.diagnosis}; {advice}", log_path=exc.log_path)


def build_env(job: Job, options: PlanOptions) -> dict[str, str]:
    """The build's extra environment: the spec's --env, doctor's MAX_JOBS etc., the CUDA toolkit."""
    env = dict(job.spec.extra_env) if job.spec else dict(job.env)
    for key, value in options.env:
        env.setdefault(key, value)
    home = job.spec.cuda_variants[0].toolkit_root if job.spec and job.spec.cuda_variants else None
    if home:  # doctor found /usr/local/cuda-X.Y for a CUDA other than the nvcc on PATH
        env["CUDA_HOME"] = home
        # the process boundary: the engine's child searches this toolkit's bin first, then our PATH
        env["PATH"] = f"{home}/bin{os.pathsep}{os.environ.get('PATH', '')}"
    # A family's build.sh ends with condapipe's fix on the staged prefix (condapipe.fix.staged); a
    # recipe directory's script may call it the same way (README: "Compressed once").
    from condapipe.fix.staged import write_launcher
    from condapipe.render.model import STAGED_FIX_ENV

    launcher = write_launcher(options.work_dir / "bin")
    if launcher is not None:
        env[STAGED_FIX_ENV] = str(launcher)
    return env


def engine_compression_level(options: PlanOptions) -> int | None:
    """The level the engine packs at: the final one. A `.conda` is compressed once, by the engine
    on every core (engine_compression_threads); the fix step copies its payload stream untouched
    unless a fix changes a payload file."""
    if options.package_format == "conda":
        return final_compression(options)[1]
    return options.compression_level


def engine_compression_threads(options: PlanOptions) -> int | None:
    """The engine's zstd threads: every core, within the memory bound the machine gives
    (condapipe.package.io.PackOptions.engine_threads); None for `.tar.bz2` (single-threaded)."""
    if options.package_format != "conda":
        return None
    from condapipe.package.io import PackOptions

    return PackOptions(zstd_level=final_compression(options)[1]).engine_threads()


def final_compression(options: PlanOptions) -> tuple[str, int]:
    """The published package's format and level: the user's --compression-level, else the default."""
    from condapipe.package.io import DEFAULT_ZSTD_LEVEL, PackOptions

    default = DEFAULT_ZSTD_LEVEL if options.package_format == "conda" else PackOptions().bz2_level
    return options.package_format, options.compression_level or default


def fix_action(
    build_step: str, family: str | None, options: PlanOptions, staged_code: Callable[[], str]
) -> Action:
    """`staged_code`: the digest of the staged fix's code (condapipe.plan.code_inputs.staged_fix_digest),
    taken when the step runs."""

    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.fix.fixer import fix_package_file
        from condapipe.package.io import PackOptions

        fmt, level = final_compression(options)
        pack = PackOptions(zstd_level=level) if fmt == "conda" else PackOptions(bz2_level=level)
        # The engine packed at the final level; a level changed since the build step ran (its
        # record names another) is this step's to apply, without building again.
        record = ctx.deps.get(build_step)
        packed_at = record.data.get("packed_at") if record else None
        repack_level = fmt == "conda" and packed_at != [fmt, level]
        fixed: list[Path] = []
        summaries = {}
        for pkg in _packages(ctx, build_step):
            # The engine's output stays as built (a rerun of fix starts from it); the fixed package
            # is written into this step's folder: its payload stream copied as the engine
            # compressed it, or repacked when a fix changed a payload file.
            report = fix_package_file(
                pkg,
                family=family,
                pack_options=pack,
                output_dir=ctx.step_dir / pkg.parent.name,
                repack_level=repack_level,
                keep_tree=True,  # the verify step reads it instead of unpacking the package again
                records_work_dir=options.work_dir,  # the package never names condapipe's work dir
                # --pack-from-stage: a payload the staged fix of this code fixed is not unpacked
                staged_code=staged_code(),
            )
            changed = len(report.changed)
            phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items())
            where = " by the staged fix before packing (not unpacked)" if report.fixed_in_stage else ""
            ctx.log.write(
                f"fixed {pkg.name}: {changed} ELF files rewritten{where}, {len(report.vendored)} vendored; "
                f"{report.written} ({fmt} level {level}); {phases}"
            )
            summaries[pkg.name] = {
                "changed": changed,
                "fixed_in_stage": report.fixed_in_stage,
                "vendored": len(report.vendored),
                "written": report.written,
                "timings": {k: round(v, 3) for k, v in report.timings.items()},
            }
            fixed.append(Path(report.output or ctx.step_dir / pkg.parent.name / pkg.name))
        data = {"fix": summaries, "compression": [fmt, level], **_note_skipped(ctx, build_step)}
        return StepOutcome(files=tuple(fixed), data=data)

    return run


def local_dependency_libs(pkg: Path, channels: tuple[Path, ...]) -> tuple[str, ...]:
    """Shared-library names shipped by the package's run dependencies found in local channels.

    A recipe directory's package links libraries of packages published earlier into the same
    channel (its own library recipe, a prerequisite): those count as provided, like the
    dependencies condapipe.data's linkage table knows.
    """
    import json
    import re

    from condapipe.package.io import package_stem, package_suffix, read_info_file, read_package_info

    info = read_package_info(pkg)
    names = {re.split(r"[\s<>=!~]", spec.strip(), maxsplit=1)[0] for spec in info.depends}
    libs: set[str] = set()
    for channel in channels:
        for subdir in dict.fromkeys((info.subdir, "noarch")):
            folder = channel / subdir
            found = sorted(folder.iterdir()) if folder.is_dir() else []
            for dep in found:
                if not package_suffix(dep.name) or package_stem(dep).rsplit("-", 2)[0] not in names:
                    continue
                for entry in json.loads(read_info_file(dep, "info/paths.json")).get("paths", []):
                    base = str(entry.get("_path", "")).rsplit("/", 1)[-1]
                    if ".so" in base:
                        libs.add(base)
    return tuple(sorted(libs))


def verify_action(
    fix_step: str,
    archs: ArchList | None,
    dso_allowlist: tuple[str, ...] = (),
    local_channels: tuple[Path, ...] = (),
) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.package import tree_record
        from condapipe.verify.verifier import verify_package

        reports = {}
        for pkg in _packages(ctx, fix_step):
            provided = local_dependency_libs(pkg, local_channels) if local_channels else ()
            try:
                report = verify_package(pkg, archs=archs, dep_libs=(*dso_allowlist, *provided))
            finally:
                tree_record.discard_soon(pkg)  # fix's kept tree: read once, then removed beside later steps
            reports[pkg.name] = report.to_dict()
            hashes = " (file hashes from the packing pass)" if report.hashes_from == "packing pass" else ""
            ctx.log.write(f"{pkg.name}: verified from the {report.read_from}{hashes}")
            for prerequisite, rel in report.static_links.items():
                ctx.log.write(f"{pkg.name}: {prerequisite} linked statically into {rel}")
            for line in report.errors:
                ctx.log.write(f"{pkg.name}: ERROR {line}")
            for line in report.warnings:
                ctx.log.write(f"{pkg.name}: warning {line}")
            if not report.ok:
                more = f" (+{len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
                raise BuildFailed(
                    f"verify failed for {pkg.name}: {report.errors[0] if report.errors else 'not ok'}{more}",
                    log_path=str(ctx.log.path),
                )
        data = {"verify": reports, "archs": archs.torch_arch_list() if archs else None}
        return StepOutcome(data={**data, **_note_skipped(ctx, fix_step)})

    return run


def test_action(fix_step: str, options: PlanOptions) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        import rattler_build

        from condapipe.package.channel_index import ensure_channel
        from condapipe.plan.test_child import run_in_child

        ensure_channel(options.output_dir)  # an unindexed local channel makes rattler-build's test fail
        packages = _packages(ctx, fix_step)
        channels = list(options.search_channels())
        tested = {pkg: rattler_build.Package.from_file(str(pkg)) for pkg in packages}
        if len(packages) > 1 or any(not package.test_count for package in tested.values()):
            channels.insert(0, str(sibling_channel(ctx, packages)))
        results = {}
        for pkg, package in tested.items():
            if not package.test_count:
                results[pkg.name] = _run_conda_build_tests(ctx, pkg, channels)
                continue
            done = run_in_child("tests", pkg, channels, ctx.log)  # its progress bars off the terminal
            if "error" in done:
                raise BuildFailed(
                    f"tests of {pkg.name} could not run: {done['error']}", log_path=str(ctx.log.path)
                )
            outcomes = done["outcomes"]
            for outcome in outcomes:
                ctx.log.write("\n".join(outcome["output"]))
            failed = [o["index"] for o in outcomes if not o["success"]]
            if failed:
                raise BuildFailed(f"tests {failed} of {pkg.name} failed", log_path=str(ctx.log.path))
            results[pkg.name] = f"{len(outcomes)} passed"
        return StepOutcome(data={"tests": results, **_note_skipped(ctx, fix_step)})

    return run


def sibling_channel(ctx: StepContext, packages: list[Path]) -> Path:
    """A channel in this step's folder holding the fixed outputs of the recipe: an output whose test
    (or run) requirements name a sibling output finds it there, as it did in the engine's own test,
    before anything is published. Hard links where the file system allows, else copies."""
    import shutil

    from condapipe.package.channel_index import index_channel

    channel = ctx.step_dir / "siblings"
    shutil.rmtree(channel, ignore_errors=True)
    for pkg in packages:
        target = channel / pkg.parent.name / pkg.name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(pkg, target)
        except OSError:
            shutil.copy2(pkg, target)
    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    index_channel(channel)
    return channel.resolve()


def _run_conda_build_tests(ctx: StepContext, pkg: Path, channels: list[str]) -> str:
    """Run a conda-build (v0) package's info/test/ scripts in a fresh env with conda-build's test
    variables, as `conda build --test` does (condapipe.plan.conda_build_tests); the package itself
    comes from this step's channel of the recipe's outputs."""
    from condapipe.plan.conda_build_tests import run_conda_build_tests

    scratch = ctx.step_dir / "conda-build-tests" / pkg.name
    return run_conda_build_tests(pkg, channels, scratch, ctx.work_dir / "test-pkgs", ctx.log.write)


def publish_action(fix_step: str, options: PlanOptions) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.publish.local_channel import publish_packages
        from condapipe.publish.upload_result import Status

        channel = options.output_dir
        failed: list[str] = []
        packages = _packages(ctx, fix_step)
        if not packages:  # every output skipped by the recipe: the channel is left as it was
            return StepOutcome(data={"channel": str(channel.resolve()), **_note_skipped(ctx, fix_step)})

        def copied(outcome: FileOutcome) -> None:
            if outcome.status is Status.EXISTS:
                ctx.log.write(f"already in the channel: {outcome.target}")  # e.g. copied before a kill
            elif outcome.status is Status.FAILED:
                failed.append(f"{outcome.basename}: {outcome.detail}")
            else:
                ctx.log.write(f"published {outcome.target}")
            pause_point(f"publish:copied:{ctx.step.id}")

        # force: a rebuild under the same file name replaces the package (and is re-indexed).
        outcomes, index = publish_packages(channel, packages, force=True, on_published=copied)
        if failed:
            raise BuildFailed(
                f"publishing into {channel} failed: {'; '.join(failed)}", log_path=str(ctx.log.path)
            )
        if index is not None:
            ctx.log.write(f"indexed {channel}: {index.subdirs}")
        published = tuple(Path(o.target) for o in outcomes)
        return StepOutcome(files=published, data={"channel": str(channel.resolve())})

    return run

"""The bodies of plan steps: each calls one stage module and returns the files it produced.

Every step writes only into its own step directory under the work dir, except publish, which
copies verified packages into the channel through a temporary name and a rename. Stage modules
(render, engines, fix, verify, channel) are imported when a step runs, so planning, --dry-run
and an unchanged rerun never pay for loading them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from condapipe.errors import BuildFailed
from condapipe.plan.runner import StepContext, StepOutcome, pause_point

if TYPE_CHECKING:
    from condapipe.plan.build_plan import Job, PlanOptions
    from condapipe.spec.arch import ArchList
    from condapipe.spec.build_spec import BuildSpec

Action = Callable[[StepContext], StepOutcome]


def _packages(ctx: StepContext, step_id: str) -> list[Path]:
    pkgs = [p for p in ctx.dep_files(step_id) if p.name.endswith((".conda", ".tar.bz2"))]
    if not pkgs:
        raise BuildFailed(f"{ctx.step.id}: {step_id} produced no package")
    return pkgs


def render_action(spec: BuildSpec, label: str) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.render.recipe_dir import render_recipe

        # One recipe dir per variant job, where users look for rendered recipes.
        result = render_recipe(spec, ctx.work_dir / "recipes" / label)
        ctx.log.write(f"rendered {len(result.files)} files into {result.out_dir}")
        return StepOutcome(files=tuple(sorted(result.files)), data={"recipe_dir": str(result.out_dir)})

    return run


def build_action(job: Job, options: PlanOptions) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.build import BuildOptions, engine_for_recipe

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
            channels=(str(options.output_dir.resolve()), *options.channels),
            pythons=job.spec.pythons if job.spec else (),
            package_format=options.package_format,
            compression_level=options.compression_level,
            # The engine tests the package as built; the test step tests it again after fix (what
            # gets published), so a failure only after fix points at the fixer.
            run_tests=options.run_tests,
            target_platform=job.platform,
            override_channels=options.override_channels,
            env=tuple(sorted(build_env(job, options).items())),
        )
        from condapipe.build.rattler_build import ensure_channel

        ensure_channel(options.output_dir)  # a missing channel fails rattler-build's test step
        ctx.log.write(f"engine {engine.name} ({why}); recipe {recipe_dir}")
        result = engine.build(recipe_dir, build_options)
        ctx.log.write(f"engine log: {result.log_path}")
        return StepOutcome(
            files=tuple(sorted(result.packages)),
            data={"engine": engine.name, "engine_log": str(result.log_path), "recipe_dir": str(recipe_dir)},
        )

    return run


def build_env(job: Job, options: PlanOptions) -> dict[str, str]:
    """The build's extra environment: the spec's --env, doctor's MAX_JOBS etc., the CUDA toolkit."""
    env = dict(job.spec.extra_env) if job.spec else {}
    for key, value in options.env:
        env.setdefault(key, value)
    cuda = job.spec.cuda_variants[0].cuda if job.spec and job.spec.cuda_variants else None
    home = dict(options.cuda_homes).get(cuda or "")
    if home:  # doctor found /usr/local/cuda-X.Y for a CUDA other than the nvcc on PATH
        env["CUDA_HOME"] = home
        env["PATH"] = f"{home}/bin{os.pathsep}{os.environ.get('PATH', '')}"
    return env


def fix_action(build_step: str, family: str | None) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.fix.fixer import fix_package_file

        fixed: list[Path] = []
        summaries = {}
        for pkg in _packages(ctx, build_step):
            # Fix a copy: the engine's output stays as built, so a rerun of fix starts from it.
            out = ctx.step_dir / pkg.parent.name / pkg.name
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pkg, out)
            report = fix_package_file(out, family=family)
            changed = len(report.changed)
            ctx.log.write(f"fixed {pkg.name}: {changed} ELF files rewritten, {len(report.vendored)} vendored")
            summaries[pkg.name] = {"changed": changed, "vendored": len(report.vendored)}
            fixed.append(out)
        return StepOutcome(files=tuple(fixed), data={"fix": summaries})

    return run


def verify_action(fix_step: str, archs: ArchList | None, dso_allowlist: tuple[str, ...] = ()) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.verify.verifier import verify_package

        reports = {}
        for pkg in _packages(ctx, fix_step):
            report = verify_package(pkg, archs=archs, dep_libs=dso_allowlist)
            reports[pkg.name] = report.to_dict()
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
        return StepOutcome(data={"verify": reports, "archs": archs.torch_arch_list() if archs else None})

    return run


def test_action(fix_step: str, options: PlanOptions) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        import rattler_build

        from condapipe.build.rattler_build import ensure_channel

        ensure_channel(options.output_dir)  # an unindexed local channel makes rattler-build's test fail
        channels = [str(options.output_dir.resolve()), *options.channels]
        results = {}
        for pkg in _packages(ctx, fix_step):
            package = rattler_build.Package.from_file(str(pkg))
            if not package.test_count:
                ctx.log.write(f"{pkg.name}: the package carries no tests")
                results[pkg.name] = "no tests"
                continue
            try:
                outcomes = package.run_tests(channel=channels)
            except rattler_build.RattlerBuildError as exc:
                raise BuildFailed(
                    f"tests of {pkg.name} could not run: {exc}", log_path=str(ctx.log.path)
                ) from None
            for outcome in outcomes:
                ctx.log.write("\n".join(outcome.output))
            failed = [o.test_index for o in outcomes if not o.success]
            if failed:
                raise BuildFailed(f"tests {failed} of {pkg.name} failed", log_path=str(ctx.log.path))
            results[pkg.name] = f"{len(outcomes)} passed"
        return StepOutcome(data={"tests": results})

    return run


def publish_action(fix_step: str, options: PlanOptions) -> Action:
    def run(ctx: StepContext) -> StepOutcome:
        from condapipe.publish.channel import (
            atomic_copy,
            channel_lock,
            file_digests,
            index_channel,
            read_package_info,
        )

        published: list[Path] = []
        replaced = False
        channel = options.output_dir
        with channel_lock(channel):
            remove_stale_temp(channel)
            for pkg in _packages(ctx, fix_step):
                info = read_package_info(pkg)
                dest = channel / info.subdir / pkg.name
                if dest.exists() and file_digests(dest)[0] == file_digests(pkg)[0]:
                    ctx.log.write(f"already in the channel: {dest}")  # e.g. copied before a kill
                else:
                    replaced = replaced or dest.exists()  # a rebuild under the same file name
                    atomic_copy(pkg, dest)  # hidden temp name in the subdir, fsync, rename
                    ctx.log.write(f"published {dest}")
                published.append(dest)
                pause_point(f"publish:copied:{ctx.step.id}")
        # A replaced file must be re-hashed: an incremental index could keep its old sha256.
        index = index_channel(channel, force=replaced)
        ctx.log.write(f"indexed {channel}: {index.subdirs}")
        return StepOutcome(files=tuple(published), data={"channel": str(channel.resolve())})

    return run


def remove_stale_temp(channel: Path) -> None:
    """Temp files of a publish killed mid-copy (hidden, never indexed) are removed on the next run."""
    if not channel.is_dir():
        return
    for sub in channel.iterdir():
        if sub.is_dir():
            for tmp in sub.glob(".*.part"):
                tmp.unlink(missing_ok=True)
    for leftover in channel.glob(".tmp"):
        shutil.rmtree(leftover, ignore_errors=True)

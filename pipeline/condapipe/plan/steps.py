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
    from condapipe.plan.jobs import Job, PlanOptions
    from condapipe.publish.upload_result import FileOutcome
    from condapipe.spec.arch import ArchList
    from condapipe.spec.build_spec import BuildSpec

Action = Callable[[StepContext], StepOutcome]


def _packages(ctx: StepContext, step_id: str) -> list[Path]:
    from condapipe.fix.package_io import package_suffix

    pkgs = [p for p in ctx.dep_files(step_id) if package_suffix(p.name)]
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
            echo=options.echo,
        )
        from condapipe.publish.channel import ensure_channel

        # The engines search both; an unindexed local channel fails rattler-build's test step.
        ensure_channel(build_options.output_dir)
        ensure_channel(options.output_dir)
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

        from condapipe.publish.channel import ensure_channel

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
        from condapipe.publish.channel import publish_packages
        from condapipe.publish.upload_result import Status

        channel = options.output_dir
        failed: list[str] = []

        def copied(outcome: FileOutcome) -> None:
            if outcome.status is Status.EXISTS:
                ctx.log.write(f"already in the channel: {outcome.target}")  # e.g. copied before a kill
            elif outcome.status is Status.FAILED:
                failed.append(f"{outcome.basename}: {outcome.detail}")
            else:
                ctx.log.write(f"published {outcome.target}")
            pause_point(f"publish:copied:{ctx.step.id}")

        # force: a rebuild under the same file name replaces the package (and is re-indexed).
        outcomes, index = publish_packages(channel, _packages(ctx, fix_step), force=True, on_published=copied)
        if failed:
            raise BuildFailed(
                f"publishing into {channel} failed: {'; '.join(failed)}", log_path=str(ctx.log.path)
            )
        if index is not None:
            ctx.log.write(f"indexed {channel}: {index.subdirs}")
        published = tuple(Path(o.target) for o in outcomes)
        return StepOutcome(files=published, data={"channel": str(channel.resolve())})

    return run

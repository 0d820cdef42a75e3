"""`condapipe plan PACKAGE`: the variants a build would make, with their IDs and steps, or (--emit)
the same plan as a CI workflow: one job per variant, prerequisites first, one publish job last.

The plan is `condapipe build`'s own (condapipe.plan.make_family_plan); the workflow is a pure
function of it (condapipe.plan.emit). Every job gets the spec as resolved here, defaults included,
so each runner builds exactly the variant this machine planned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from condapipe import __version__
from condapipe.buildspec.settings import SPEC_FLAG_KEYS, Settings
from condapipe.cli.flags import settings_from_flags, spec_options, with_option
from condapipe.cli.output import console, json_option, print_json
from condapipe.engines import ENGINE_NAMES
from condapipe.errors import UsageError


def _spec_flags(settings: Settings, choices: tuple[Any, ...]) -> tuple[str, ...]:
    """The spec as flags: config file and command line merged, plus the defaults chosen here."""
    spec = {k: v for k, v in settings.spec_dict().items() if k in SPEC_FLAG_KEYS}
    for choice in choices:
        spec[choice.key] = [choice.value] if choice.key in ("cuda", "python") else choice.value
    flags: list[str] = []
    for key in SPEC_FLAG_KEYS:  # a fixed order: the same spec gives the same workflow
        value = spec.get(key)
        if value is None or value in ((), [], ""):
            continue
        flag = "--" + key.replace("_", "-")
        if key == "env":
            items = value.items() if isinstance(value, dict) else ()
            flags += [x for name, val in sorted(items) for x in (flag, f"{name}={val}")]
        elif isinstance(value, list | tuple):
            flags += [x for item in value for x in (flag, str(item))]
        else:
            flags += [flag, str(value)]
    return tuple(flags)


def _print_variants(plan: Any, variants: list[Any], rows: list[dict[str, Any]]) -> None:
    lines = [f"{len(variants)} variant(s); build one with `condapipe build … --variant ID`:"]
    for v in variants:
        needs = f" (needs {', '.join(v.needs)} in a channel)" if v.needs else ""
        lines.append(f"  {v.id}{needs}")
        for row in rows:
            if row["package"] == v.id:
                mark = "run " if row["action"] == "run" else "skip"
                lines.append(f"    {mark} {row['kind']}: {row['title']} — {row['why']}")
    skipped = sorted({r["package"] for r in rows} - {v.id for v in variants})
    lines += [f"  not built: {label} (a channel in use has it)" for label in skipped]
    lines += [f"  note: {note}" for note in plan.notes]
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)


@click.command("plan")
@click.argument("package")
@spec_options
@click.option(
    "--emit",
    type=click.Choice(("github-actions", "json")),
    help="Write the plan as a CI workflow: GitHub Actions, or JSON for any other engine.",
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="File (default stdout)."
)
@click.option("--engine", type=click.Choice(ENGINE_NAMES), help="Passed to every job's `condapipe build`.")
@click.option(
    "-c", "--channel", "channels", multiple=True, help="Extra channel for dependencies (every job)."
)
@click.option("--no-test", is_flag=True, help="Every job skips the recipe's tests.")
@click.option(
    "--compile-cache", metavar="URL", help="Every job's --compile-cache (a store all runners reach)."
)
@click.option("--runs-on", default="ubuntu-latest", show_default=True, help="Runner label of every job.")
@click.option(
    "--runner-python", default="3.12", show_default=True, help="Python the runners install condapipe in."
)
@click.option(
    "--install",
    default=f"condapipe=={__version__}",
    show_default=True,
    help="pip requirement that installs condapipe on the runners.",
)
@click.option(
    "--upload-channel",
    metavar="ORG",
    help="anaconda.org owner the publish job uploads to (default: the ANACONDA_CHANNEL CI variable).",
)
@with_option
@json_option
def command(
    package: str,
    emit: str | None,
    output: Path | None,
    engine: str | None,
    channels: tuple[str, ...],
    no_test: bool,
    compile_cache: str | None,
    runs_on: str,
    runner_python: str,
    install: str,
    upload_channel: str | None,
    companions: tuple[str, ...],
    as_json: bool,
    **spec_params: Any,
) -> None:
    """Show the variants `condapipe build PACKAGE` would make, or write them as a CI workflow."""
    from condapipe.cli.output import DEFAULT_OUTPUT_DIR, DEFAULT_WORK_DIR
    from condapipe.cli.spec_input import machine_spec
    from condapipe.plan import PlanOptions, describe, make_family_plan
    from condapipe.plan.emit import CiRequest, ci_variants
    from condapipe.plan.emit import emit as emit_text
    from condapipe.plan.state import atomic_write_text

    if output is not None and emit is None:
        raise UsageError("-o/--output writes a workflow: add --emit github-actions or --emit json")
    settings = settings_from_flags(package, spec_params)
    spec, choices = machine_spec(settings)
    options = PlanOptions(
        output_dir=DEFAULT_OUTPUT_DIR.absolute(),
        work_dir=DEFAULT_WORK_DIR.absolute(),
        engine=engine or "auto",
        channels=channels,
        run_tests=not no_test,
    )
    plan = make_family_plan(spec, options, companions=companions)
    if emit is None:
        variants, rows = ci_variants(plan), describe(plan)
        if as_json:
            print_json({"variants": [{"id": v.id, "needs": list(v.needs)} for v in variants], "steps": rows})
        else:
            _print_variants(plan, variants, rows)
        return
    build_flags: list[str] = ["--engine", engine] if engine else []
    build_flags += [x for chan in channels for x in ("--channel", chan)]
    build_flags += ["--no-test"] if no_test else []
    build_flags += ["--compile-cache", compile_cache] if compile_cache else []
    build_flags += [x for family in dict.fromkeys(companions) for x in ("--with", family)]
    request = CiRequest(
        package=spec.package,
        spec_flags=_spec_flags(settings, choices),
        build_flags=tuple(build_flags),
        runs_on=runs_on,
        python=runner_python,
        install=install,
        upload_channel=upload_channel,
    )
    text = emit_text(plan, request, emit)
    if output is None:
        click.echo(text, nl=False)
        return
    atomic_write_text(output, text)
    if as_json:
        print_json({"written": str(output), "variants": [v.id for v in ci_variants(plan)]})
    else:
        click.echo(f"wrote {output} ({len(ci_variants(plan))} variant job(s) and a publish job)", err=True)

"""`condapipe plan PACKAGE`: the variants a build would make, with their IDs and steps, or (--emit)
the same plan as a CI workflow: one job per variant, prerequisites first, one publish job last.

The plan is `condapipe build`'s own (condapipe.plan.make_family_plan); the workflow is a pure
function of it (condapipe.plan.emit). Every job gets the spec as resolved here, defaults included,
so each runner builds exactly the variant this machine planned.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from condapipe.cli.flags import (
    compile_cache_option,
    dependency_channels_option,
    engine_option,
    force_option,
    json_option,
    no_test_option,
    output_option,
    settings_from_flags,
    spec_options,
    with_option,
)
from condapipe.cli.output import console, print_json
from condapipe.cli.plan_text import step_groups
from condapipe.errors import UsageError
from condapipe.plan.emit import FROM_REPOSITORY
from condapipe.safe_paths import output_file
from condapipe.value_rules import check_channel, check_owner, parse_url, refuse_url_credentials


def _print_variants(plan: Any, variants: list[Any], rows: list[dict[str, Any]]) -> None:
    lines = [f"{len(variants)} variant(s); build one with `condapipe build … --variant ID`:"]
    for v in variants:
        needs = f" (needs {', '.join(v.needs)} in a channel)" if v.needs else ""
        lines.append(f"  {v.id}{needs}")
        for action, why, _, kinds in step_groups([r for r in rows if r["package"] == v.id]):
            lines.append(f"    {'run ' if action == 'run' else 'skip'} {', '.join(kinds)} — {why}")
    skipped = sorted({r["package"] for r in rows} - {v.id for v in variants})
    lines += [f"  not built: {label} (a channel in use has it)" for label in skipped]
    lines += [f"  note: {note}" for note in plan.notes]
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def _check_ci_values(channels: tuple[str, ...], upload_channel: str | None, install: str) -> None:
    """What every job is given is what conda and anaconda.org accept (condapipe.value_rules)."""
    for chan in channels:
        check_channel(chan, "-c/--channel")
    if upload_channel is not None:
        check_owner(upload_channel, "--upload-channel")
    if not install.strip() or install.lstrip().startswith("-"):
        raise UsageError(
            "--install: expected a pip requirement: . (a wheel of this repository) or a direct reference "
            "(condapipe @ git+https://…@REV), not an option"
        )
    if install != FROM_REPOSITORY and "@" not in install and "://" not in install and "/" not in install:
        raise UsageError(
            f"--install {install}: condapipe is not published on PyPI, so a name would install whatever "
            "someone registers under it; give . (the default: a wheel built from this repository at the "
            "workflow's commit) or a direct reference: 'condapipe @ git+https://github.com/OWNER/condapipe@REV'"
        )
    for word in install.split():
        if "://" in word:  # `condapipe @ https://…`: no credentials in a workflow
            refuse_url_credentials(
                parse_url(word, "--install"), "--install", "let pip read them from ~/.netrc"
            )


def _repository_note(install: str, target: Path | None) -> str | None:
    """A warning when the default install (a wheel of the workflow's own repository) cannot work:
    the workflow is written outside a git checkout of condapipe (or a fork of it)."""
    if install != FROM_REPOSITORY:
        return None
    start = (target.parent if target is not None else Path.cwd()).absolute()
    root = next((d for d in (start, *start.parents) if (d / ".git").exists()), None)
    pyproject = root / "pyproject.toml" if root else None
    text = (
        pyproject.read_text(encoding="utf-8", errors="replace")[:200_000]
        if pyproject and pyproject.is_file()
        else ""
    )
    if re.search(r'^name\s*=\s*"condapipe"', text, re.MULTILINE):
        return None
    where = f"{root} is not condapipe's repository" if root else f"{start} is in no git repository"
    return (
        f"the workflow builds condapipe from the repository it runs in, and {where}: commit it to your "
        "condapipe fork, or pass --install 'condapipe @ git+https://github.com/OWNER/condapipe@REV'"
    )


@click.command("plan")
@click.argument("package", required=False)
@spec_options
@click.option(
    "--emit",
    type=click.Choice(("github-actions", "json")),
    help="Write the plan as a CI workflow: GitHub Actions, or JSON for any other engine.",
)
@output_option("output", "File (default stdout); an existing one is replaced only with --force.")
@force_option("Replace the --output file if it exists (never condapipe.toml).")
@engine_option("Passed to every job's `condapipe build`.", default=None)
@dependency_channels_option("Channel searched for dependencies, passed to every job (as `conda build -c`).")
@no_test_option("Every job skips the recipe's tests.")
@compile_cache_option("Every job's --compile-cache (a store all runners reach).")
@click.option("--runs-on", default="ubuntu-latest", show_default=True, help="Runner label of every job.")
@click.option(
    "--runner-python", default="3.12", show_default=True, help="Python the runners install condapipe in."
)
@click.option(
    "--install",
    default=FROM_REPOSITORY,
    show_default=True,
    help="How the runners get condapipe: . builds a wheel from the repository the workflow runs in (at "
    "its commit; the workflow must live in condapipe's repository or a fork), else a direct reference "
    "'condapipe @ git+https://github.com/OWNER/condapipe@REV' (condapipe is not on PyPI).",
)
@click.option(
    "--upload-channel",
    "--upload-owner",
    "upload_channel",
    metavar="ORG",
    help="anaconda.org owner the publish job uploads to (default: the ANACONDA_CHANNEL CI variable).",
)
@with_option
@json_option
def command(
    package: str | None,
    emit: str | None,
    output: str | None,
    force: bool,
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
    """Show the variants `condapipe build PACKAGE` would make, or write them as a CI workflow.

    PACKAGE may come from the config file instead (`package = "pytorch"` in condapipe.toml).
    """
    from condapipe.cli.output import DEFAULT_OUTPUT_DIR, DEFAULT_WORK_DIR
    from condapipe.cli.spec_input import machine_spec, spec_flags
    from condapipe.plan import PlanOptions, describe, make_family_plan
    from condapipe.plan.emit import CiRequest, ci_variants
    from condapipe.plan.emit import emit as emit_text
    from condapipe.plan.state import atomic_write_text

    if output is not None and emit is None:
        raise UsageError("-o/--output writes a workflow: add --emit github-actions or --emit json")
    target = output_file(output, "-o/--output", force=force) if output is not None else None
    _check_ci_values(channels, upload_channel, install)
    settings = settings_from_flags(package, spec_params, compile_cache=compile_cache)
    spec, choices = machine_spec(settings, companions=companions)
    options = PlanOptions(
        output_dir=DEFAULT_OUTPUT_DIR.absolute(),
        work_dir=DEFAULT_WORK_DIR.absolute(),
        engine=engine or "auto",
        channels=channels,
        run_tests=not no_test,
    )
    sources = {f: src for f in companions if (src := settings.package_source(f))}
    plan = make_family_plan(spec, options, companions=companions, companion_sources=sources)
    if emit is None:
        variants, rows = ci_variants(plan), describe(plan)
        if as_json:
            print_json({"variants": [{"id": v.id, "needs": list(v.needs)} for v in variants], "steps": rows})
        else:
            _print_variants(plan, variants, rows)
        return
    build_flags: list[str] = ["--engine", engine] if engine else []
    # Each job's channels are named: its --channel prerequisites/... would otherwise replace the
    # default conda-forge (a -c list replaces the default, as in rattler-build).
    from condapipe.plan.build_channels import dependency_channels

    job_channels = dependency_channels(channels or settings.channels)
    build_flags += [x for chan in job_channels for x in ("--channel", chan)]
    build_flags += ["--no-test"] if no_test else []
    build_flags += ["--compile-cache", compile_cache] if compile_cache else []
    build_flags += [x for family in dict.fromkeys(companions) for x in ("--with", family)]
    request = CiRequest(
        package=spec.package,
        spec_flags=spec_flags(settings, choices),
        build_flags=tuple(build_flags),
        runs_on=runs_on,
        python=runner_python,
        install=install,
        upload_channel=upload_channel,
    )
    text = emit_text(plan, request, emit)
    note = _repository_note(install, target)
    if target is None:
        click.echo(text, nl=False)
    else:
        atomic_write_text(target, text)
        if as_json:
            print_json({"written": str(target), "variants": [v.id for v in ci_variants(plan)]})
        else:
            click.echo(
                f"wrote {target} ({len(ci_variants(plan))} variant job(s) and a publish job)", err=True
            )
    if note:  # after the workflow is out: a warning, not a reason to write nothing
        click.echo(f"warning: {note}", err=True)

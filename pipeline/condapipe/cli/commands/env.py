"""`condapipe env [PACKAGE…] -p DIR`: an environment from the built channel, then its smoke check.

The end of the journey without conda: py-rattler installs what `condapipe build` put into
--output-dir (and its dependencies from the dependency channels) into a new prefix, and the
family's check runs there (for pytorch: import, torch.cuda.is_available(), the archs).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from condapipe.cli.flags import (
    FolderPath,
    command_settings,
    dependency_channels_option,
    dry_run_option,
    json_option,
    offline_option,
    output_dir_option,
    work_dir_option,
)
from condapipe.cli.output import console, err_console, print_json
from condapipe.errors import UsageError
from condapipe.value_rules import check_channel

DEFAULT_PREFIX = Path("env")
EXAMPLE = "condapipe env pytorch -p ./torch-env"


def _last_built(work_dir: Path) -> tuple[str, ...]:
    """The packages the last build in `work_dir` asked for (its report.json), for a bare `condapipe env`."""
    report = work_dir / "report.json"
    if not report.is_file() or report.is_symlink():
        return ()
    try:
        data = json.loads(report.read_text(encoding="utf-8")[:10_000_000])
    except (OSError, ValueError):
        return ()
    asked = set(data.get("packages") or ()) if isinstance(data, dict) else set()
    details = data.get("package_details") or () if isinstance(data, dict) else ()
    names = [d.get("name") for d in details if isinstance(d, dict) and d.get("path") in asked]
    return tuple(sorted({n for n in names if isinstance(n, str) and n}))


def _echo(line: str) -> None:
    console.print(line, soft_wrap=True, markup=False, highlight=False)


@click.command("env")
@click.argument("packages", nargs=-1, metavar="[PACKAGE…]")
@click.option(
    "-p",
    "--prefix",
    type=FolderPath(path_type=Path, file_okay=False),
    default=DEFAULT_PREFIX,
    show_default=True,
    help="The environment's folder: new, empty, or an environment made before.",
)
@output_dir_option("The local channel `condapipe build` wrote (searched first).")
@work_dir_option("Package cache (pkgs/) and the last build's report.json (the default PACKAGEs).")
@dependency_channels_option(
    "Channel for the packages' dependencies (name, URL or directory); repeatable. Replaces the default "
    "(conda-forge; config key channels); the output dir is always searched first."
)
@offline_option("Search local channels only (the output dir, -c directories).")
@click.option("--no-check", is_flag=True, help="Install only; skip the family's smoke check.")
@dry_run_option
@json_option
def command(
    packages: tuple[str, ...],
    prefix: Path,
    output_dir: Path,
    work_dir: Path,
    channels: tuple[str, ...],
    offline: bool,
    no_check: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Install built packages into a new environment (no conda needed) and smoke-check them.

    py-rattler makes the environment from --output-dir and the dependency channels; then each
    family's check runs in it (pytorch: import, torch.cuda.is_available(), the archs).

    PACKAGE is a name or match spec (pytorch, "pytorch ==2.6.0"); none: what the last build in
    --work-dir made.
    """
    from condapipe.package.channel_order import search_order
    from condapipe.plan.build_channels import channels_in_use
    from condapipe.plan.env_create import EnvRequest, check_prefix, install_env, record_lines, solve_env
    from condapipe.plan.smoke_check import checked_families, run_smoke_check

    for chan in channels:
        check_channel(chan, "-c/--channel")
    specs = packages or _last_built(work_dir)
    if not specs:
        raise UsageError(f"name the packages to install (nothing built in {work_dir} yet); e.g. {EXAMPLE}")
    check_prefix(prefix)
    if not output_dir.is_dir():
        raise UsageError(
            f"--output-dir {output_dir}: no such channel; build into it first (condapipe build …)"
        )

    given = channels or command_settings(None, {}).channels  # condapipe.toml's
    searched, _ = channels_in_use(given, offline=offline)
    request = EnvRequest(
        prefix=prefix.absolute(),
        specs=tuple(specs),
        channels=search_order(output_dir, searched),
        cache_dir=work_dir.absolute() / "pkgs",
    )
    records = solve_env(request)
    if dry_run:
        held = record_lines(records)
        if as_json:
            print_json(
                {
                    "dry_run": True,
                    "prefix": str(request.prefix),
                    "channels": request.channels,
                    "packages": held,
                }
            )
            return
        _echo(f"would make {request.prefix} from {', '.join(request.channels)}:")
        for line in held:
            _echo(f"  {line}")
        return
    held = install_env(request, records)
    import rattler

    names = [rattler.MatchSpec(s).name.normalized for s in specs]
    results = [] if no_check else [run_smoke_check(request.prefix, f) for f in checked_families(names)]
    if as_json:
        print_json(
            {"prefix": str(request.prefix), "packages": held, "checks": [r.to_dict() for r in results]}
        )
    else:
        _echo(f"environment: {request.prefix} ({len(held)} packages)")
        for result in results:
            _echo(f"check {result.family}: {result.status}")
            for line in result.lines:
                _echo(f"  {line}")
        if any(r.status == "no-cuda" for r in results):
            err_console.print(
                "note: CUDA is not available on this machine (no NVIDIA GPU or driver): the packages "
                "installed and their check passed up to the GPU; run it on a GPU machine to check that part",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
        python = request.prefix / "bin" / "python"
        use = f"{python}, or " if python.exists() else ""
        _echo(f"use it: {use}PATH={request.prefix / 'bin'}:$PATH")
    failed = [r.family for r in results if r.status == "failed"]
    if failed:
        from condapipe.errors import BuildFailed

        raise BuildFailed(f"the smoke check of {', '.join(failed)} failed in {request.prefix} (output above)")

"""`condapipe doctor [PACKAGE] [spec flags]`: will this machine build that, and if not, why not.

Without PACKAGE it checks the machine for the default target (data/doctor.yaml), so "is my
machine ready?" is the plain `condapipe doctor`.

The same checks run before every `condapipe build`; running them alone answers "can I start
the 6-hour build now?" in seconds. Exit 3 when a finding blocks the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from condapipe.buildspec.defaults import newest_upstream_cuda
from condapipe.cli.flags import (
    engine_option,
    json_option,
    output_dir_option,
    settings_from_flags,
    spec_options,
    work_dir_option,
)
from condapipe.cli.output import console, err_console, print_json
from condapipe.cli.spec_input import machine_spec
from condapipe.doctor import DoctorReport, Machine, find_toolkits, run_doctor
from condapipe.doctor.run import default_target

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "block": "bold red"}


def findings_table(report: DoctorReport, title: str) -> Table:
    table = Table(title=title)
    table.add_column("check")
    table.add_column("level")
    table.add_column("finding")
    table.add_column("fix")
    for f in report.findings:
        table.add_row(Text(f.check), Text(f.level, style=_STYLE[f.level]), Text(f.message), Text(f.fix))
    return table


@click.command("doctor")
@click.argument("package", required=False)
@spec_options
@engine_option("The engine the build would use (auto: as `condapipe build` picks it).")
@work_dir_option("Where the build would run (its free disk space is checked).")
@output_dir_option("The channel the build would publish into (checked for being writable).")
@json_option
def command(
    package: str | None, engine: str, work_dir: Path, output_dir: Path, as_json: bool, **params: Any
) -> None:
    """Check this machine against a build of PACKAGE: nvcc, gcc, driver, RAM, disk, cuDNN, CMake.

    No PACKAGE (and none in condapipe.toml): the machine is checked for the default target with
    the defaults `condapipe build` would choose.
    """
    settings = settings_from_flags(package, params)
    machine = Machine.from_environ(work_dir, settings.environ, output_dir=output_dir)
    name = settings.package
    if not name:
        name = default_target()
        extra: dict[str, Any] = {}
        if not params.get("cuda") and not find_toolkits(machine):
            # Nothing to infer a CUDA from: check for the newest one (the nvcc finding says what to install).
            extra["cuda"] = (newest_upstream_cuda(),)
        err_console.print(
            f"no package given: checking this machine for `condapipe build {name}` with its defaults",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
        settings = settings.for_package(name, **extra)
    spec, choices = machine_spec(settings, work_dir=work_dir)
    report = run_doctor(spec, machine, engine=engine)
    if as_json:
        print_json(
            {
                "package": spec.package,
                "version": spec.version,
                "chosen": [c.to_dict() for c in choices],
                **report.to_dict(),
            }
        )
    else:
        console.print(findings_table(report, f"condapipe doctor: {spec.package} {spec.version}"))
        env = " ".join(f"{k}={v}" for k, v in report.build_env)
        if env:
            console.print(f"build environment: {env}", soft_wrap=True, markup=False)
    report.raise_if_blocking(before_build=False)

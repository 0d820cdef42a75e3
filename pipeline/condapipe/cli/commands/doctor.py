"""`condapipe doctor [PACKAGE] [spec flags]`: will this machine build that, and if not, why not.

The same checks run before every `condapipe build`; running them alone answers "can I start
the 6-hour build now?" in seconds. Exit 3 when a finding blocks the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from condapipe.build import ENGINE_NAMES
from condapipe.cli.output import console, json_option, print_json, work_dir_option
from condapipe.doctor import DoctorReport, Machine, run_doctor
from condapipe.spec.options import resolve_package, spec_from_cli, spec_options

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
@click.option("--engine", type=click.Choice(ENGINE_NAMES), default="auto", show_default=True)
@work_dir_option("Where the build would run (its free disk space is checked).")
@json_option
def command(package: str | None, engine: str, work_dir: Path, as_json: bool, **params: Any) -> None:
    """Check this machine against a build of PACKAGE: nvcc, gcc, driver, RAM, disk, cuDNN, CMake."""
    spec = spec_from_cli(resolve_package(package, params), params)
    report = run_doctor(spec, Machine.from_environ(work_dir), engine=engine)
    if as_json:
        print_json({"package": spec.package, **report.to_dict()})
    else:
        console.print(findings_table(report, f"condapipe doctor: {spec.package} {spec.version}"))
        env = " ".join(f"{k}={v}" for k, v in report.build_env)
        if env:
            console.print(f"build environment: {env}", soft_wrap=True, markup=False)
    report.raise_if_blocking(before_build=False)

"""`condapipe config show`: print the BuildSpec that the flags and the config file resolve to.

Before a 9-hour build, users need to see what will be built (every default filled in from the
tables, which config file was read, which warnings apply) without rendering anything.
"""

from __future__ import annotations

import click
from rich.table import Table

from condapipe.buildspec.build_spec import BuildSpec, family_rules
from condapipe.cli.flags import json_option, settings_from_flags, spec_options
from condapipe.cli.output import console, print_json
from condapipe.cli.spec_input import echo_choices, machine_spec


@click.group(name="config")
def command() -> None:
    """Inspect condapipe's configuration."""


@command.command(name="show")
@click.argument("package", required=False)
@spec_options
@json_option
def show(package: str | None, as_json: bool, **params: object) -> None:
    """Print the resolved build spec for PACKAGE (default: `package` from the config file)."""
    settings = settings_from_flags(package, params)
    spec, choices = machine_spec(settings, quiet=True)
    path = settings.config_file
    if as_json:
        print_json(
            {
                "config_file": str(path) if path else None,
                "upload": settings.to_dict()["upload"],
                "settings": settings.to_dict(),
                "spec": spec.to_dict(),
                "chosen": [c.to_dict() for c in choices],
            }
        )
        return
    echo_choices(spec, choices)
    console.print(_table(spec, str(path) if path else "(none)"))


def _table(spec: BuildSpec, config_file: str) -> Table:
    table = Table(title=f"{spec.package} {spec.version}", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    table.add_row("config file", config_file)
    table.add_row("build number", str(spec.build_number))
    table.add_row("python", " ".join(spec.pythons) or "-")
    table.add_row("platform", spec.platform)
    table.add_row("blas", spec.blas if family_rules(spec.package).blas else "- (does not apply)")
    src = spec.source
    table.add_row("source", " ".join(str(x) for x in (src.kind, src.url or src.path, src.rev) if x))
    for v in spec.cuda_variants:
        if v.is_cpu:
            table.add_row("variant", "cpu")
            continue
        detail = f"cuda {v.cuda}  archs {v.archs.torch_arch_list() if v.archs else '-'}"
        if v.cudnn:
            detail += f"  cudnn {v.cudnn}"
        if v.build_split_cuda:
            detail += "  BUILD_SPLIT_CUDA"
        table.add_row("variant", detail)
    for key, value in spec.extra_env:
        table.add_row("env", f"{key}={value}")
    return table

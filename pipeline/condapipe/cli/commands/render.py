"""`condapipe render PACKAGE [spec flags] -o DIR`: write the recipe in both formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from condapipe.cli.flags import (
    dry_run_option,
    force_option,
    json_option,
    output_option,
    settings_from_flags,
    spec_options,
)
from condapipe.cli.output import console, print_json
from condapipe.cli.spec_input import machine_spec
from condapipe.errors import UsageError
from condapipe.render.recipe_dir import build_model, check_target, plan_files, render_model


@click.command("render")
@click.argument("package", required=False)
@spec_options
@output_option("out_dir", "Recipe directory to write (required).")
@force_option("Replace DIR even if it is not a previous render.")
@dry_run_option
@json_option
def command(
    package: str | None, out_dir: str | None, force: bool, dry_run: bool, as_json: bool, **params: Any
) -> None:
    """Render the conda recipe of PACKAGE (pytorch, magma, ...) into DIR, v0 and v1 formats.

    PACKAGE may come from the config file instead (`package = "pytorch"`). What flags and the
    config file leave open (CUDA, version, Python) is chosen exactly as `build` chooses it, and said.
    """
    if not out_dir:
        raise UsageError("render needs -o DIR: the recipe directory to write")
    spec, choices = machine_spec(settings_from_flags(package, params))  # build's own resolution
    model = build_model(spec)
    target = Path(out_dir)
    if dry_run:
        files = plan_files(model)
        replaced = check_target(target, force=force)
        result: dict[str, Any] = {
            "out_dir": str(target),
            "package": model.name,
            "files": [str(target / name) for name in sorted(files)],
            "replaced": replaced,
            "dry_run": True,
        }
    else:
        result = {**render_model(model, target, force=force).to_dict(), "dry_run": False}
    result["spec"] = spec.to_dict()
    result["choices"] = [choice.to_dict() for choice in choices]
    if as_json:
        print_json(result)
        return
    verb = "would write" if dry_run else "wrote"
    note = " (replacing)" if result["replaced"] else ""
    console.print(f"{verb} {len(result['files'])} files to {target}{note}")
    for name in result["files"]:
        console.print(f"  {name}")

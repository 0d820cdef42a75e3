"""`condapipe render PACKAGE [spec flags] -o DIR`: write the recipe in both formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from condapipe.output import console, dry_run_option, json_option, print_json
from condapipe.render import build_model, check_target, plan_files, render_model
from condapipe.spec_options import spec_from_cli, spec_options


@click.command("render")
@click.argument("package")
@spec_options
@click.option("-o", "--output", "out_dir", required=True, help="Recipe directory to write.")
@click.option("--force", is_flag=True, help="Replace DIR even if it is not a previous render.")
@dry_run_option
@json_option
def command(package: str, out_dir: str, force: bool, dry_run: bool, as_json: bool, **params: Any) -> None:
    """Render the conda recipe of PACKAGE (pytorch, magma, ...) into DIR, v0 and v1 formats."""
    spec = spec_from_cli(package, params)
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
    if as_json:
        print_json(result)
        return
    verb = "would write" if dry_run else "wrote"
    note = " (replacing)" if result["replaced"] else ""
    console.print(f"{verb} {len(result['files'])} files to {target}{note}")
    for name in result["files"]:
        console.print(f"  {name}")

"""`condapipe index DIR`: write repodata for every subdir of a local channel (py-rattler's indexer)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from condapipe.cli.flags import FolderPath, dry_run_option, force_option, json_option
from condapipe.cli.output import console, print_json
from condapipe.package.channel_index import index_channel


@click.command("index")
@click.argument("directory", type=FolderPath(path_type=Path, file_okay=False))
@force_option("Re-read every package instead of only new ones.")
@click.option(
    "--init", is_flag=True, help="Make DIRECTORY a channel even if it has no noarch/ or platform folder yet."
)
@dry_run_option
@json_option
def command(directory: Path, force: bool, init: bool, dry_run: bool, as_json: bool) -> None:
    """Index the local conda channel DIRECTORY (repodata.json and .zst per subdir)."""
    result = index_channel(directory, force=force, dry_run=dry_run, init=init)
    if as_json:
        print_json({**result.to_dict(), "dry_run": dry_run})
        return
    table = Table(title=f"{'would index' if dry_run else 'indexed'} {result.channel}")
    table.add_column("subdir")
    table.add_column("packages", justify="right")
    for subdir, count in result.subdirs.items():
        table.add_row(subdir, str(count))
    console.print(table)

"""`condapipe wheels WHEEL|DIR... --to CHANNEL`: a local channel of host packages from PyPI wheels.

For machines without conda channels: `pip download numpy==2.0.1 mkl==2023.1.0 ... -d wheels/`, then
`condapipe wheels wheels/ --to host-channel` and `condapipe build ... -c host-channel`. `python` itself
is made as a venv of the CPython running condapipe (condapipe.inputchannels.wheel_channel says why).
"""

from __future__ import annotations

from pathlib import Path

import click

from condapipe.cli.flags import json_option, to_channel_option
from condapipe.cli.output import console, print_json
from condapipe.errors import UsageError


def _wheel_files(sources: tuple[Path, ...]) -> list[Path]:
    """The wheels named, and those directly inside each folder named (sorted, not recursive)."""
    found: list[Path] = []
    for source in sources:
        if source.is_dir():
            found += sorted(p for p in source.iterdir() if p.suffix == ".whl" and p.is_file())
        elif source.is_file():
            found.append(source)
        else:
            raise UsageError(f"{source}: no such wheel or folder")
    return found


@click.command("wheels")
@click.argument("sources", nargs=-1, type=click.Path(path_type=Path))
@to_channel_option("Local channel to write the packages into (made if missing, then indexed).", required=True)
@click.option(
    "--python/--no-python",
    "with_python",
    default=True,
    show_default=True,
    help="Also make `python` as a venv of the CPython running condapipe.",
)
@json_option
def command(sources: tuple[Path, ...], to: Path, with_python: bool, as_json: bool) -> None:
    """Make conda packages of PyPI wheels (and of this CPython) in the local channel CHANNEL."""
    from condapipe.inputchannels.wheel_channel import make_wheel_channel

    wheels = _wheel_files(sources)
    if not wheels and not with_python:
        raise UsageError("no wheels given (name wheel files or folders that hold them)")
    channel = to
    written = make_wheel_channel(channel, wheels, with_python=with_python)
    if as_json:
        print_json({"channel": str(channel.absolute()), "packages": [p.name for p in written]})
        return
    for path in written:
        console.print(f"{path.name}", soft_wrap=True, markup=False, highlight=False)
    console.print(f"{len(written)} packages in {channel.absolute()}", soft_wrap=True, markup=False)

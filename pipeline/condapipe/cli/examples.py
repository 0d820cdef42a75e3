"""One real example per command, shown at the end of its --help (with where --debug goes).

Kept in one table so every command has one and a test can parse each against its command's
options: an example that names a flag the command does not take fails that test.
"""

from __future__ import annotations

import click

EXAMPLES: dict[str, str] = {
    "doctor": "condapipe doctor pytorch --cuda 12.4",
    "render": "condapipe render pytorch --version 2.6.0 --cuda 12.4 --python 3.11 -o recipe",
    "build": "condapipe build cuda-smoke --cuda 13.0 --arch 9.0",
    "fix": "condapipe fix channel/linux-64/cuda-smoke-1.0.0-cuda13.0_0.conda",
    "verify": "condapipe verify channel/linux-64/cuda-smoke-1.0.0-cuda13.0_0.conda --arch 9.0",
    "index": "condapipe index ./channel",
    "wheels": "condapipe wheels wheels/ --to host-channel",
    "upload": "condapipe upload --channel myorg --label main --dry-run",
    "env": "condapipe env pytorch -p ./torch-env",
    "clean": "condapipe clean --dry-run",
    "plan": "condapipe plan pytorch --version 2.4.1 --cuda 12.4 --emit github-actions -o pytorch.yml",
    "patches list": "condapipe patches list pytorch --version 2.4.1",
    "patches check": "condapipe patches check pytorch --version 1.13.0 --source ./pytorch",
    "config show": "condapipe config show pytorch --jetson tx2",
    "patches": "condapipe patches list pytorch --version 2.4.1",
    "config": "condapipe config show pytorch --jetson tx2",
}

DEBUG_NOTE = "--debug (anywhere on the line) prints a traceback on error."


def add_examples(name: str, command: click.Command) -> click.Command:
    """Give `command` (and a group's subcommands) its example and the --debug note as epilog."""
    if name in EXAMPLES and not command.epilog:
        command.epilog = f"\b\nExample:\n  {EXAMPLES[name]}\n\n{DEBUG_NOTE}"
    if isinstance(command, click.Group):
        for sub_name, sub in command.commands.items():
            add_examples(f"{name} {sub_name}", sub)
    return command

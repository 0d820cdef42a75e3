"""Shared CLI output helpers: --json, --dry-run and rich printing in one place."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

from condapipe.cli.interrupt import interrupted

F = TypeVar("F", bound=Callable[..., Any])

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


def echo_lines(target: Console = err_console) -> Callable[[str, str | None], None]:
    """A line sink for stages that stream output (build logs): each line printed as plain text.

    Stages never print; the CLI hands them this (see condapipe.engines.logs.LineSink).
    """

    def echo(line: str, style: str | None) -> None:
        if interrupted():  # what the engine says about being stopped is noise: the CLI says it once
            return
        target.print(Text(line, style=style or ""), soft_wrap=True)

    return echo


_JSON_PRINTED = "condapipe.json_printed"  # a key of click's per-invocation ctx.meta


def print_json(data: Any) -> None:
    """Print JSON deterministically (sorted keys, paths as strings)."""
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_JSON_PRINTED] = True


def json_printed(ctx: click.Context) -> bool:
    """True when this invocation already printed its JSON result (an error then adds no second one)."""
    return bool(ctx.meta.get(_JSON_PRINTED))


# The conventions of the CLI surface (docs/design.md), shared so every command means the same folders.
DEFAULT_OUTPUT_DIR = Path("channel")
DEFAULT_WORK_DIR = Path(".condapipe")

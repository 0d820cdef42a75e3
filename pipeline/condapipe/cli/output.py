"""Shared CLI output helpers: --json, --dry-run and rich printing in one place."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console, ConsoleDimensions
from rich.text import Text

from condapipe.cli.interrupt import interrupted

F = TypeVar("F", bound=Callable[..., Any])

# Width of output that goes to a pipe or file: wide enough that no path or table cell is cut or
# wrapped mid-name (a terminal's width applies only where a terminal shows the output).
PIPE_WIDTH = 4096


class _Console(Console):
    """A rich Console that is as wide as the terminal it writes to, and unlimited when piped.

    (rich takes the width of any terminal among stdin/stdout/stderr, so `condapipe … | less` would
    cut table cells to the width of the terminal the error stream goes to.)"""

    @property  # type: ignore[override]
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)  # type: ignore[attr-defined]
        if self._width is None and not self.is_terminal and "COLUMNS" not in self._environ:
            return ConsoleDimensions(PIPE_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _Console(stderr=False, highlight=False)
err_console = _Console(stderr=True, highlight=False)


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

"""Shared CLI output helpers: --json, --dry-run and rich printing in one place."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

F = TypeVar("F", bound=Callable[..., Any])

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


def json_option(func: F) -> F:
    """Add --json: print a machine-readable result instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(func)


def dry_run_option(func: F) -> F:
    """Add --dry-run: say what would change without changing anything."""
    return click.option("--dry-run", is_flag=True, help="Show what would be done; change nothing.")(func)


def echo_lines(target: Console = err_console) -> Callable[[str, str | None], None]:
    """A line sink for stages that stream output (build logs): each line printed as plain text.

    Stages never print; the CLI hands them this (see condapipe.engines.logs.LineSink).
    """

    def echo(line: str, style: str | None) -> None:
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


class FolderPath(click.Path):
    """click.Path that refuses '' and / (click turns '' into `.`, the current directory, silently)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from condapipe.safe_paths import destination

        if isinstance(value, str):
            name = param.opts[0] if param is not None and param.opts else (param.name if param else "path")
            destination(value, name or "path")
        return super().convert(value, param, ctx)


def output_dir_option(help_text: str) -> Callable[[F], F]:
    """Add --output-dir (default ./channel): the local channel packages go into or come from."""
    return click.option(
        "--output-dir",
        type=FolderPath(path_type=Path, file_okay=False),
        default=DEFAULT_OUTPUT_DIR,
        show_default=True,
        help=help_text,
    )


def work_dir_option(help_text: str) -> Callable[[F], F]:
    """Add --work-dir (default ./.condapipe): recipes, scratch space, state and logs."""
    return click.option(
        "--work-dir",
        type=FolderPath(path_type=Path, file_okay=False),
        default=DEFAULT_WORK_DIR,
        show_default=True,
        help=help_text,
    )

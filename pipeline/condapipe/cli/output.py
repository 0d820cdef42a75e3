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

    Stages never print; the CLI hands them this (see condapipe.build.logs.LineSink).
    """

    def echo(line: str, style: str | None) -> None:
        target.print(Text(line, style=style or ""), soft_wrap=True)

    return echo


def print_json(data: Any) -> None:
    """Print JSON deterministically (sorted keys, paths as strings)."""
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


# The conventions of DESIGN.md's CLI surface, shared so every command means the same folders.
DEFAULT_OUTPUT_DIR = Path("channel")
DEFAULT_WORK_DIR = Path(".condapipe")


def output_dir_option(help_text: str) -> Callable[[F], F]:
    """Add --output-dir (default ./channel): the local channel packages go into or come from."""
    return click.option(
        "--output-dir",
        type=click.Path(path_type=Path, file_okay=False),
        default=DEFAULT_OUTPUT_DIR,
        show_default=True,
        help=help_text,
    )


def work_dir_option(help_text: str) -> Callable[[F], F]:
    """Add --work-dir (default ./.condapipe): recipes, scratch space, state and logs."""
    return click.option(
        "--work-dir",
        type=click.Path(path_type=Path, file_okay=False),
        default=DEFAULT_WORK_DIR,
        show_default=True,
        help=help_text,
    )

"""The `condapipe` command: a thin click group that maps errors to exit codes.

Commands live in `condapipe.commands.<name>` (one module each, exposing `command`) so that
features stay small and independent; this module only wires them up and prints failures
as one line (a traceback only with --debug).
"""

from __future__ import annotations

import importlib
import sys

import click

from condapipe import __version__
from condapipe.errors import CondapipeError

# Module names under condapipe.commands, in --help order.
COMMAND_MODULES: tuple[str, ...] = (
    "render",
    "build",
    "index",
    "upload",
    "patches",
    "config",
    "fix",
    "verify",
    "doctor",
)


class _Group(click.Group):
    """Turns CondapipeError into a one-line message and its exit code."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except CondapipeError as exc:
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(__version__, prog_name="condapipe")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Build custom PyTorch and magma-cuda conda packages and publish them to a channel."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


for _name in COMMAND_MODULES:
    main.add_command(importlib.import_module(f"condapipe.commands.{_name}").command)

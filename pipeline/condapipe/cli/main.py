"""The `condapipe` command: a thin click group that maps errors to exit codes.

Commands live in `condapipe.cli.commands.<name>` (one module each, exposing `command`) so that
features stay small and independent; this module only wires them up and prints failures
as one line (a traceback only with --debug).
"""

from __future__ import annotations

import importlib
import sys
import traceback

import click

from condapipe import __version__
from condapipe.errors import CondapipeError

# Command names, each the name of its module under condapipe.cli.commands, in --help order.
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
    """Loads each command's module only when that command runs (startup stays fast), and turns
    errors into a one-line message and the right exit code (a traceback only with --debug)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMAND_MODULES:
            return None
        return importlib.import_module(f"condapipe.cli.commands.{cmd_name}").command

    def invoke(self, ctx: click.Context) -> object:
        debug = bool(ctx.find_root().params.get("debug"))
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except CondapipeError as exc:
            _fail(f"error: {exc}", exc.exit_code, debug)
        except KeyboardInterrupt:
            _fail("interrupted", 130, debug)
        except OSError as exc:
            # A file or network problem the stage did not anticipate: still one line.
            _fail(f"error: {exc}", 1, debug)
        except Exception as exc:
            _fail(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)", 1, debug)
        return None


def _fail(message: str, code: int, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    click.echo(message, err=True)
    sys.exit(code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(__version__, prog_name="condapipe")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Build custom PyTorch and magma-cuda conda packages and publish them to a channel."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug

"""The `condapipe` command: a thin click group that maps errors to exit codes.

Commands live in `condapipe.cli.commands.<name>` (one module each, exposing `command`) so that
features stay small and independent; this module only wires them up and prints failures
as one line (a traceback only with --debug).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import sys
import traceback
from typing import Any

import click

from condapipe import __version__
from condapipe.cli.interrupt import INTERRUPTED_EXIT, PLAIN_MESSAGE, handling_interrupts, interrupted
from condapipe.cli.interrupt import MESSAGE as INTERRUPTED_MESSAGE
from condapipe.cli.long_values import shortened
from condapipe.cli.os_errors import os_error_line
from condapipe.errors import CondapipeError
from condapipe.process_settings import process_settings, use_process_settings

# Command names, each the name of its module under condapipe.cli.commands, in --help order: the
# order of the work (check the machine, render, build, fix, verify, index, upload), then the rest.
COMMAND_MODULES: tuple[str, ...] = (
    "doctor",
    "render",
    "build",
    "fix",
    "verify",
    "index",
    "wheels",
    "upload",
    "env",
    "clean",
    "plan",
    "patches",
    "config",
)


class _Group(click.Group):
    """Loads each command's module only when that command runs (startup stays fast), and turns
    errors into a one-line message and the right exit code (a traceback only with --debug)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMAND_MODULES)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in workflow order, each with the whole first line of its help (never cut)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=1000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMAND_MODULES:
            return None
        from condapipe.cli.examples import add_examples

        return add_examples(cmd_name, importlib.import_module(f"condapipe.cli.commands.{cmd_name}").command)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """--debug is accepted anywhere (`condapipe verify X --debug`, as the error messages suggest):
        moved in front of the subcommand before click parses; nothing after `--` is touched."""
        end = args.index("--") if "--" in args else len(args)
        head = [a for a in args[:end] if a != "--debug"]
        if len(head) != end:
            args = ["--debug", *head, *args[end:]]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        debug = bool(ctx.find_root().params.get("debug"))
        as_json = _wants_json(ctx)
        builds = _subcommand(ctx) in _RUNS_BUILDS  # read before invoking: click consumes the args
        resumes = builds and "--dry-run" not in _sub_args(ctx)  # a dry run has nothing to resume
        try:
            with handling_interrupts(stop_children=builds):
                try:
                    result = super().invoke(ctx)
                except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
                    raise
                except BaseException:
                    if interrupted():  # whatever the engine made of the signal, it was the signal
                        raise KeyboardInterrupt from None
                    raise
                if interrupted():  # a signal the engine swallowed: the user still asked to stop
                    raise KeyboardInterrupt
                return result
        except click.ClickException as exc:
            if not as_json:
                exc.message = shortened(exc.message)  # click prints it, with its usage line
                raise
            _fail(f"error: {exc.format_message()}", exc.exit_code, debug, as_json)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except CondapipeError as exc:
            _fail(f"error: {exc}", exc.exit_code, debug, as_json)
        except KeyboardInterrupt:
            _fail(INTERRUPTED_MESSAGE if resumes else PLAIN_MESSAGE, INTERRUPTED_EXIT, debug, as_json)
        except OSError as exc:
            # A file or network problem the stage did not anticipate: still one line, with the fix.
            _fail(*os_error_line(exc), debug, as_json)
        except RecursionError:
            _fail("error: input nested too deeply to read", 2, debug, as_json)
        except Exception as exc:
            message = f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)"
            _fail(message, 1, debug, as_json)
        return None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The console entry point: the exit status is decided here, once the work is done.

        py-rattler 0.28 can abort the interpreter while it shuts down (PyGILState_Release,
        SIGABRT/SIGSEGV) after work that succeeded, so once it has been loaded the process ends
        with os._exit after flushing, never reaching the library's teardown. (CliRunner calls
        `main()` directly, so tests in-process are unaffected.)
        """
        try:
            self.main(*args, **kwargs)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                click.echo(str(exc.code), err=True)
        if "rattler" not in sys.modules:
            sys.exit(code)
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


# Commands that run build scripts (engines): a signal must stop their processes at once.
_RUNS_BUILDS = ("build",)


def _subcommand(ctx: click.Context) -> str | None:
    sub = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # click >= 8.2 keeps the subcommand here
    return sub[0] if sub else None


def _sub_args(ctx: click.Context) -> list[str]:
    """The subcommand and its arguments, up to a `--`."""
    sub = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # click >= 8.2 keeps the subcommand here
    return sub[: sub.index("--")] if "--" in sub else sub


def _wants_json(ctx: click.Context) -> bool:
    """True when the command line asked for --json (even if click could not parse the rest)."""
    return "--json" in _sub_args(ctx)


def _fail(message: str, code: int, debug: bool, as_json: bool = False) -> None:
    message = shortened(message)
    if debug:
        traceback.print_exc()
    from condapipe.cli.output import json_printed  # rich loads only when something failed

    ctx = click.get_current_context(silent=True)
    if as_json and not (
        ctx is not None and json_printed(ctx)
    ):  # scripts that asked for JSON get JSON on stdout, the line on stderr
        click.echo(json.dumps({"error": message.removeprefix("error: "), "exit_code": code}))
    click.echo(message, err=True)
    sys.exit(code)


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="\b\nExample:\n  condapipe build cuda-smoke --cuda 13.0 --arch 9.0\n\n"
    "Every command takes --help, --json and --debug (anywhere on the line: a traceback on error).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs (also after the command).")
@click.version_option(__version__, prog_name="condapipe")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Build custom PyTorch and magma-cuda conda packages and publish them to a channel."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    # the process's share of the environment, read once here (every command's share: its Settings)
    use_process_settings(process_settings(os.environ))

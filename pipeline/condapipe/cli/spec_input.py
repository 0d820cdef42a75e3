"""The spec every spec-taking command works on (build, render, doctor, config show): flags, config
file, then the defaults from the tables and this machine, each choice and spec warning printed once.

`render` goes through here too, so `render X` writes the recipe `build X` would build: the same
CUDA, version and Python, chosen by the same code and said in the same "chose ..." lines.
"""

from __future__ import annotations

from pathlib import Path

import click

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.defaults import Choice
from condapipe.buildspec.settings import Settings, spec_with_defaults
from condapipe.cli.output import DEFAULT_WORK_DIR, err_console
from condapipe.doctor import Machine, find_toolkits


def typed_command(package: str) -> str:
    """ "condapipe build magma": the command the user ran, up to the flags (for next-step hints)."""
    ctx = click.get_current_context(silent=True)
    words = ctx.command_path.split()[1:] if ctx is not None else []
    return " ".join(["condapipe", *words, package])


def machine_spec(
    settings: Settings, *, work_dir: Path = DEFAULT_WORK_DIR, quiet: bool = False
) -> tuple[BuildSpec, tuple[Choice, ...]]:
    """The BuildSpec with defaults filled in; prints "chose …" and "warning: …" lines to stderr."""
    package = settings.require_package()
    spec, choices = spec_with_defaults(
        settings,
        toolkits=lambda: find_toolkits(Machine.from_environ(work_dir)),
        command=typed_command(package),
    )
    if not quiet:
        echo_choices(spec, choices)
    return spec, choices


def echo_spec_warnings(spec: BuildSpec) -> None:
    """The spec's warnings on stderr, one unwrapped line each ("warning: ...")."""
    for warning in spec.warnings:
        err_console.print(f"warning: {warning}", soft_wrap=True, markup=False, highlight=False)


def echo_choices(spec: BuildSpec, choices: tuple[Choice, ...]) -> None:
    """One unwrapped stderr line per default chosen, then one per spec warning."""
    for choice in choices:
        err_console.print(choice.line(spec.package), soft_wrap=True, markup=False, highlight=False)
    echo_spec_warnings(spec)

"""The spec every spec-taking command works on (build, render, doctor, config show): flags, config
file, then the defaults from the tables and this machine, each choice and spec warning printed once.

`render` goes through here too, so `render X` writes the recipe `build X` would build: the same
CUDA, version and Python, chosen by the same code and said in the same "chose ..." lines.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.defaults import Choice
from condapipe.buildspec.settings import SPEC_FLAG_KEYS, Settings, spec_with_defaults
from condapipe.cli.output import DEFAULT_OUTPUT_DIR, DEFAULT_WORK_DIR, err_console
from condapipe.doctor import Machine, find_toolkits


def typed_command(package: str) -> str:
    """ "condapipe build magma": the command the user ran, up to the flags (for next-step hints)."""
    ctx = click.get_current_context(silent=True)
    words = ctx.command_path.split()[1:] if ctx is not None else []
    return " ".join(["condapipe", *words, package])


def machine_spec(
    settings: Settings,
    *,
    work_dir: Path = DEFAULT_WORK_DIR,
    quiet: bool = False,
    companions: tuple[str, ...] = (),
) -> tuple[BuildSpec, tuple[Choice, ...]]:
    """The BuildSpec with defaults filled in; prints "chose …" and "warning: …" lines to stderr.

    `companions` (--with) limit the version to one they pair with and add the pair's line."""
    package = settings.require_package()
    spec, choices = spec_with_defaults(
        settings,
        toolkits=lambda: find_toolkits(Machine.from_environ(work_dir, settings.environ)),
        command=typed_command(package),
        companions=companions,
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


def spec_flags(settings: Settings, choices: tuple[Choice, ...]) -> tuple[str, ...]:
    """The spec as flags: config file and command line merged, plus the defaults chosen here, so
    another command (a CI job, `condapipe doctor`) works on exactly this target."""
    spec = {k: v for k, v in settings.spec_dict().items() if k in SPEC_FLAG_KEYS}
    for choice in choices:
        if choice.pins:
            spec[choice.key] = [choice.value] if choice.key in ("cuda", "python") else choice.value
    flags: list[str] = []
    for key in SPEC_FLAG_KEYS:  # a fixed order: the same spec gives the same flags
        value: Any = spec.get(key)
        if value is None or value in ((), [], ""):
            continue
        flag = "--" + key.replace("_", "-")
        if key == "env":
            items = value.items() if isinstance(value, dict) else ()
            flags += [x for name, val in sorted(items) for x in (flag, f"{name}={val}")]
        elif isinstance(value, list | tuple):
            flags += [x for item in value for x in (flag, str(item))]
        else:
            flags += [flag, str(value)]
    return tuple(flags)


def doctor_command(
    settings: Settings,
    choices: tuple[Choice, ...],
    *,
    work_dir: Path = DEFAULT_WORK_DIR,
    output_dir: Path = DEFAULT_OUTPUT_DIR,
    engine: str = "auto",
) -> str:
    """The `condapipe doctor …` line that checks the same target, folders and engine as a build."""
    words = ["condapipe", "doctor", settings.require_package(), *spec_flags(settings, choices)]
    if engine != "auto":
        words += ["--engine", engine]
    if Path(work_dir) != DEFAULT_WORK_DIR:
        words += ["--work-dir", str(work_dir)]
    if Path(output_dir) != DEFAULT_OUTPUT_DIR:
        words += ["--output-dir", str(output_dir)]
    return shlex.join(words)

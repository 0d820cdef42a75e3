"""Every option is declared once: a flag that several commands take (--engine, --compile-cache,
--no-test, -j, --platform, --to, --force, -o, ...) is written in cli/flags.py and each command uses
that declaration, with its own help text where the meaning narrows; a command's own flag is written in
that command's module only. Sources are read with ast (nothing is imported).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import click

from condapipe.cli.main import main

CLI_DIR = Path(__file__).resolve().parents[2] / "pipeline" / "condapipe" / "cli"


def declarations(source: str) -> list[str]:
    """The option spellings ("--engine", "-j") that `click.option(...)` calls in `source` declare."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "option":
            found += [
                a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")
            ]
    return found


def test_the_scan_sees_a_declaration() -> None:
    assert declarations('@click.option("-j", "--jobs", type=int)\ndef f(): ...') == ["-j", "--jobs"]


def test_no_option_is_declared_in_two_modules() -> None:
    where: dict[str, set[str]] = defaultdict(set)
    for path in CLI_DIR.rglob("*.py"):
        for name in declarations(path.read_text(encoding="utf-8")):
            where[name].add(path.relative_to(CLI_DIR).as_posix())
    assert {name: sorted(files) for name, files in where.items() if len(files) > 1} == {}


def test_the_shared_options_reach_every_command_that_takes_them() -> None:
    def options(command: str) -> set[str]:
        cmd = main.get_command(click.Context(main), command)
        assert cmd is not None
        return {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}

    for command in ("build", "doctor", "plan"):
        assert "--engine" in options(command)
    for command in ("build", "plan"):
        assert {"--compile-cache", "--no-test"} <= options(command)
    for command in ("fix", "verify"):
        assert {"-j", "--jobs", "--build-prefix"} <= options(command)
    for command in ("wheels", "upload"):
        assert "--to" in options(command)

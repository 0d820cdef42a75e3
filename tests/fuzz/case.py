"""One fuzz invocation and what its sandbox must look like afterwards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CANARY = "canary-5ec7e7-d0n0tpr1nt"  # a secret given where secrets must not be; never in any output


@dataclass
class Case:
    """One invocation: argv, and how to prepare its sandbox (files into work/)."""

    argv: list[str]
    setup: Callable[[Path, Path], None] = lambda work, fixtures: None
    inputs: tuple[str, ...] = ()  # files in work/ that must not change when the command fails
    label: str = ""
    protected: tuple[str, ...] = ()  # files in work/ that must not change, whatever the exit code
    absent: tuple[str, ...] = ()  # paths under work/ that must not exist afterwards
    canary: bool = False  # CANARY was given somewhere: it must be in no output and no written file
    canary_sources: tuple[str, ...] = ()  # files the setup wrote with CANARY in them (the user's own)
    workflow: str | None = None  # "-" (stdout) or a file in work/: a workflow whose run lines are run
    env: tuple[tuple[str, str], ...] = ()  # set in the command's environment (relative paths: in work/)
    # (signal number, seconds after its handlers are installed, to the whole process group): the
    # runner sends it while the command runs; it must end in one line ("interrupted"), exit 130
    signal: tuple[int, float, bool] | None = None

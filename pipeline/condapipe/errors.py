"""Error types that the CLI maps to exit codes and one-line messages.

User mistakes, environment problems and build failures need different exit codes
so that scripts driving condapipe can tell them apart without parsing text.
"""

from __future__ import annotations


class CondapipeError(Exception):
    """Base class: printed as one line by the CLI, without a traceback."""

    exit_code = 1


class UsageError(CondapipeError):
    """The user asked for something invalid (unknown CUDA, bad arch list, ...). Exit 2."""

    exit_code = 2


class EnvironmentProblem(CondapipeError):
    """The machine cannot do what was asked (no nvcc, gcc too new, ...). Exit 3."""

    exit_code = 3

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message if not fix else f"{message} (fix: {fix})")
        self.fix = fix


class BuildFailed(CondapipeError):
    """A build, fix, verify or upload step failed. Exit 1, with a diagnosis when known."""

    exit_code = 1

    def __init__(self, message: str, diagnosis: str | None = None, log_path: str | None = None) -> None:
        parts = [message]
        if diagnosis:
            parts.append(diagnosis)
        if log_path:
            parts.append(f"log: {log_path}")
        super().__init__(" — ".join(parts))
        self.message = message
        self.diagnosis = diagnosis
        self.log_path = log_path

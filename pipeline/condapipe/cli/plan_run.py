"""Run a plan with the live step table and make its report: what `build PACKAGE` and
`build RECIPE_DIR` share.

Its own module so that a recipe-dir build does not import the family path's doctor, source probe
and recipe templates (jinja2, urllib) just to run its plan.
"""

from __future__ import annotations

from typing import Any

from condapipe.cli.interrupt import interrupted
from condapipe.cli.output import console, err_console
from condapipe.errors import CondapipeError
from condapipe.plan import Plan, PlanFailed, PlanResult, StepDisplay, build_report, run_plan
from condapipe.plan.runner import Step
from condapipe.plan.step_progress import StepProgress


class _QuietOnceInterrupted:
    """The step display, silent once the user interrupted: the step that fails because it was
    stopped is not a failure to show (the CLI prints the one "interrupted" line)."""

    def __init__(self, display: StepDisplay) -> None:
        self._display = display

    def started(self, step: Step, why: str) -> None:
        if not interrupted():
            self._display.started(step, why)

    def finished(self, step: Step, status: str, why: str, seconds: float) -> None:
        if not interrupted():
            self._display.finished(step, status, why, seconds)

    def watch(self, step: Step, progress: StepProgress) -> None:
        if not interrupted():
            self._display.watch(step, progress)


def say_on_stderr(line: str) -> None:
    """One line on stderr, as written (no markup, no wrapping)."""
    err_console.print(line, soft_wrap=True, markup=False, highlight=False)


def live_table_shown() -> bool:
    """Whether the live step table (on stderr) stays on the same terminal the summary goes to: then
    the summary does not print the steps a second time."""
    return err_console.is_terminal and console.is_terminal


def run_and_report(
    plan: Plan, channels: tuple[str, ...] | None = None
) -> tuple[PlanResult | None, CondapipeError | None, dict[str, Any]]:
    """Run `plan` with the live step display; the result, the error that stopped it, the report
    (whose install line searches `channels`, the build's dependency channels, as the build did).

    Shared by `build PACKAGE` and `build RECIPE_DIR`, which run the same steps."""
    result: PlanResult | None = None
    error: CondapipeError | None = None
    try:
        with StepDisplay(plan, err_console) as display:
            result = run_plan(plan, display=_QuietOnceInterrupted(display), notify=say_on_stderr)
    except PlanFailed as exc:
        if interrupted():  # the step failed because it was stopped: no failure report, no summary
            raise KeyboardInterrupt from None
        result, error = exc.result, exc.cause
    return result, error, build_report(plan, result, error=str(error) if error else None, channels=channels)

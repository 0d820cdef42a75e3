"""Live progress of a plan: one line per step, updated as steps start and finish.

Long builds need a visible heartbeat; on a terminal this is a rich live table, elsewhere (CI
logs, pipes) one plain line per event so the log stays readable. It writes only to the console
the caller (the CLI) hands it.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from condapipe.plan.runner import Plan, Step

_STYLE = {"ran": "green", "unchanged": "dim", "skipped": "yellow", "failed": "bold red", "running": "cyan"}


class StepDisplay:
    """Shows each step's state; used as a context manager around run_plan (a StepObserver)."""

    def __init__(self, plan: Plan, console: Console, *, live: bool | None = None) -> None:
        self.console = console
        self.rows: dict[str, tuple[str, str, str]] = {s.id: ("waiting", "", "") for s in plan.steps}
        self.plan = plan
        self.use_live = self.console.is_terminal if live is None else live
        self._live: Live | None = None
        self._started: dict[str, float] = {}

    def __enter__(self) -> StepDisplay:
        if self.use_live:
            # Not transient: the final table stays on the terminal (whole: vertical_overflow), and
            # the summary after it does not print the steps again (print_summary(steps_shown=True)).
            self._live = Live(
                self._table(),
                console=self.console,
                refresh_per_second=2,
                transient=False,
                vertical_overflow="visible",
            )
            self._live.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def _table(self) -> Table:
        table = Table(title="condapipe plan", expand=False)
        table.add_column("step")
        table.add_column("status")
        table.add_column("time", justify="right")
        table.add_column("why")
        for step in self.plan.steps:
            status, seconds, why = self.rows[step.id]
            if status == "running":
                seconds = f"{time.monotonic() - self._started[step.id]:.0f}s"
            # Text, not markup: step ids, paths and reasons may contain "[...]".
            table.add_row(Text(step.id), Text(status, style=_STYLE.get(status, "")), seconds, Text(why))
        return table

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._table())

    def started(self, step: Step, why: str) -> None:
        self._started[step.id] = time.monotonic()
        self.rows[step.id] = ("running", "", why)
        if self._live is None:
            line = Text.assemble(("▶ ", "cyan"), f"{step.id}: {step.title} ({why})")
            self.console.print(line, highlight=False)
        self._refresh()

    def finished(self, step: Step, status: str, why: str, seconds: float) -> None:
        self.rows[step.id] = (status, f"{seconds:.1f}s" if status in ("ran", "failed") else "", why)
        if self._live is None:
            line = Text.assemble(
                (f"{status:>9}", _STYLE.get(status, "")), f" {step.id} {seconds:.1f}s — {why}"
            )
            self.console.print(line, highlight=False)
        self._refresh()

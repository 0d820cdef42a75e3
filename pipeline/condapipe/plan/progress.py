"""Live progress of a plan: one line per step, updated as steps start and finish.

Long builds need a visible heartbeat; on a terminal this is a rich live table whose time moves, with
the running step's compile progress (ninja's [n/N]), an estimate of the time left and its log path;
elsewhere (CI logs, pipes, `> build.log`) one plain line per event plus one short progress line
every `every` seconds (CONDAPIPE_PROGRESS_EVERY, read by condapipe.process_settings, default 30),
so the log stays readable. It
writes only to the console the caller (the CLI) hands it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from condapipe.plan.step_progress import StepProgress, span
from condapipe.process_settings import process

if TYPE_CHECKING:
    from condapipe.plan.runner import Plan, Step

DEFAULT_EVERY_S = 30.0


def progress_every() -> float:
    """Seconds between the progress lines of a redirected log (CONDAPIPE_PROGRESS_EVERY, >= 1)."""
    every = process().progress_every
    return DEFAULT_EVERY_S if every is None else every


_STYLE = {"ran": "green", "unchanged": "dim", "skipped": "yellow", "failed": "bold red", "running": "cyan"}


class StepDisplay:
    """Shows each step's state; used as a context manager around run_plan (a StepObserver)."""

    def __init__(
        self, plan: Plan, console: Console, *, live: bool | None = None, every: float | None = None
    ) -> None:
        self.console = console
        self.rows: dict[str, tuple[str, str, str]] = {s.id: ("waiting", "", "") for s in plan.steps}
        self.plan = plan
        self.use_live = self.console.is_terminal if live is None else live
        self.every = progress_every() if every is None else every
        self._live: Live | None = None
        self._started: dict[str, float] = {}
        self._progress: dict[str, StepProgress] = {}
        self._running: str | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> StepDisplay:
        if self.use_live:
            # Not transient: the final table stays on the terminal (whole: vertical_overflow), and
            # the summary after it does not print the steps again (print_summary(steps_shown=True)).
            # The renderable is rebuilt at every refresh, so the running step's time moves.
            self._live = Live(
                _Fresh(self),
                console=self.console,
                refresh_per_second=2,
                transient=False,
                vertical_overflow="visible",
            )
            self._live.__enter__()
        else:
            self._ticker = threading.Thread(target=self._tick, name="condapipe-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def _tick(self) -> None:
        """In a redirected log: one short line about the running step every `every` seconds."""
        while not self._stop.wait(self.every):
            line = self.progress_line()
            if line:
                self.console.print(Text(line), highlight=False, soft_wrap=True)

    def progress_line(self) -> str:
        """ "… build:x running 3m12s, compile [412/1338] 31%, ~7m05s left" for the running step."""
        step_id = self._running
        if step_id is None or step_id not in self._started:
            return ""
        parts = [f"… {step_id} running {span(time.monotonic() - self._started[step_id])}"]
        progress = self._progress.get(step_id)
        if progress is not None:
            view = progress.view()
            if view.compile_text():
                parts.append(f"compile {view.compile_text()}")
            if view.left_text():
                parts.append(view.left_text())
        return ", ".join(parts)

    def watch(self, step: Step, progress: StepProgress) -> None:
        """Follow the running step's own progress (log path, [n/N]); shown from now on."""
        self._progress[step.id] = progress
        if self._live is None:
            log = progress.view().log
            if log is not None:
                self._say_log(log)
            progress.log_changed = self._say_log
        self._refresh()

    def _say_log(self, log: Path) -> None:
        """In a redirected log: where the running step's own log is (again when it changes)."""
        self.console.print(Text(f"  log: {log}"), highlight=False, soft_wrap=True)

    def _table(self) -> Table:
        table = Table(title="condapipe plan", expand=False)
        table.add_column("step")
        table.add_column("status")
        table.add_column("time", justify="right")
        table.add_column("progress")
        table.add_column("why")
        logs: list[str] = []
        for step in self.plan.steps:
            status, seconds, why = self.rows[step.id]
            shown = ""
            if status == "running":
                seconds = span(time.monotonic() - self._started[step.id])
                progress = self._progress.get(step.id)
                if progress is not None:
                    view = progress.view()
                    shown = " ".join(t for t in (view.compile_text(), view.left_text()) if t)
                    if view.log is not None:
                        logs.append(f"{step.id} log: {view.log}")
            # Text, not markup: step ids, paths and reasons may contain "[...]".
            table.add_row(
                Text(step.id), Text(status, style=_STYLE.get(status, "")), seconds, Text(shown), Text(why)
            )
        if logs:
            table.caption = Text("\n".join(logs))
            table.caption_justify = "left"
        return table

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def started(self, step: Step, why: str) -> None:
        self._started[step.id] = time.monotonic()
        self._running = step.id
        self.rows[step.id] = ("running", "", why)
        if self._live is None:
            line = Text.assemble(("▶ ", "cyan"), f"{step.id}: {step.title} ({why})")
            self.console.print(line, highlight=False)
        self._refresh()

    def finished(self, step: Step, status: str, why: str, seconds: float) -> None:
        if self._running == step.id:
            self._running = None
        self.rows[step.id] = (status, f"{seconds:.1f}s" if status in ("ran", "failed") else "", why)
        if self._live is None:
            line = Text.assemble(
                (f"{status:>9}", _STYLE.get(status, "")), f" {step.id} {seconds:.1f}s — {why}"
            )
            self.console.print(line, highlight=False)
        self._refresh()


class _Fresh:
    """What Live shows: the table as it is at each refresh (not as it was at the last event)."""

    def __init__(self, display: StepDisplay) -> None:
        self._display = display

    def __rich__(self) -> Table:
        return self._display._table()

"""A running step's own progress: where its log is, and how far its compile has come.

A PyTorch build is one step of hours; "running" alone tells a user nothing. The step (its engine's
output, line by line) feeds this object; the display (condapipe.plan.progress) reads it from
another thread: the log path from the first second, ninja's `[n/N]` or CMake-make's `[ 45%]` of
the compile, and an estimate of the time left from the rate so far.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# ninja's status ("[412/1338] Building CXX object ..."), anywhere after the engine's own prefix
# (rattler-build draws "│ │ " before each line of the build script); CMake's Makefiles' "[ 45%]".
_NINJA = re.compile(r"(?:^|[\s│|])\[(\d+)/(\d+)\]\s")
_MAKE = re.compile(r"(?:^|[\s│|])\[\s*(\d{1,3})%\]\s")
# How often a step that keeps writing output renews its "still running" mark (interrupted.touch).
_ALIVE_EVERY_S = 10.0
# An estimate needs this much progress behind it, or it is noise.
_MIN_STEPS_FOR_ESTIMATE = 3
_MIN_SECONDS_FOR_ESTIMATE = 5.0


@dataclass(frozen=True)
class ProgressView:
    """What the display shows of a running step at one moment."""

    log: Path | None
    done: int | None
    total: int | None
    percent_only: bool  # make's [ 45%]: done/total are percents
    seconds_left: float | None

    def compile_text(self) -> str:
        """ "[412/1338] 31%" or "45%", or "" before any compile progress was seen."""
        if self.done is None or not self.total:
            return ""
        if self.percent_only:
            return f"{self.done}%"
        return f"[{self.done}/{self.total}] {100 * self.done // self.total}%"

    def left_text(self) -> str:
        return f"~{span(self.seconds_left)} left" if self.seconds_left is not None else ""


def span(seconds: float) -> str:
    """1h02m, 3m12s, 45s: short enough for a table column."""
    whole = max(0, int(seconds))
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class StepProgress:
    """Written by the running step (any thread), read by the display."""

    def __init__(self, log: Path | None = None, *, on_alive: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._log = log
        self._on_alive = on_alive
        self._alive_at = 0.0
        self._done: int | None = None
        self._total: int | None = None
        self._percent = False
        self._base: tuple[float, int] | None = None  # (when, done) the rate is measured from
        self.log_changed: Callable[[Path], None] | None = None  # the display's, told of a new log

    def set_log(self, path: Path) -> None:
        """The log the user should read now (the engine's, once it opens)."""
        with self._lock:
            self._log = path
        if self.log_changed is not None:
            self.log_changed(path)

    def line(self, text: str) -> None:
        """One line of the step's output: compile progress is taken from it."""
        now = time.monotonic()
        if self._on_alive is not None and now - self._alive_at >= _ALIVE_EVERY_S:
            self._alive_at = now
            self._on_alive()
        found = _NINJA.search(text)
        if found:
            self._count(int(found.group(1)), int(found.group(2)), False, now)
            return
        made = _MAKE.search(text)
        if made and int(made.group(1)) <= 100:
            self._count(int(made.group(1)), 100, True, now)

    def _count(self, done: int, total: int, percent: bool, now: float) -> None:
        if total <= 0 or done > total:
            return
        with self._lock:
            # A new build (another total, or counting from the start again) restarts the rate.
            restarted = total != self._total or percent != self._percent or done < (self._done or 0)
            if self._base is None or restarted:
                self._base = (now, done)
            self._done, self._total, self._percent = done, total, percent

    def view(self) -> ProgressView:
        with self._lock:
            left = None
            if self._base is not None and self._done is not None and self._total:
                since, first = self._base
                steps, seconds = self._done - first, time.monotonic() - since
                if steps >= _MIN_STEPS_FOR_ESTIMATE and seconds >= _MIN_SECONDS_FOR_ESTIMATE:
                    left = seconds / steps * (self._total - self._done)
            return ProgressView(self._log, self._done, self._total, self._percent, left)

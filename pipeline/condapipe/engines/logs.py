"""Build logs: every line goes to a file kept for later and, as it happens, to the caller's sink.

Multi-hour builds fail far from where the user is looking; the file is what `diagnose` reads
and what a user attaches to a bug report, the stream is how they watch progress. The build stage
does not print: the CLI passes a sink (`BuildOptions.echo`) that writes to its console.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TextIO

from condapipe import build_session

LineSink = Callable[[str, str | None], None]
"""Receives each build-output line as it is written: (line without ANSI codes, style hint such as
"red", "yellow", "bold", or None). The CLI's sink prints it; None means the log file only."""

# Terminal control sequences (colours, cursor moves) are kept off the log file.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def unique_path(path: Path) -> Path:
    """`path`, or `path` with a counter when a log of that name already exists."""
    candidate, n = path, 1
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}.{n}{path.suffix}")
        n += 1
    return candidate


class BuildLog:
    """Tees lines to a log file and (optionally) a sink that shows them as they come."""

    def __init__(
        self, path: Path, *, echo: LineSink | None = None, opened: Callable[[Path], None] | None = None
    ) -> None:
        self.path = unique_path(path)
        self.echo = echo
        self.opened = opened
        self.lines_written = 0
        self._fh: TextIO | None = None

    def __enter__(self) -> BuildLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("w", encoding="utf-8", errors="replace")
        if self.opened is not None:
            self.opened(self.path)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def write(self, text: str, *, style: str | None = None) -> None:
        """Record one or more lines of build output."""
        if self._fh is None:
            raise RuntimeError("BuildLog used outside its `with` block")
        for line in text.splitlines() or [""]:
            clean = _ANSI.sub("", line)
            self._fh.write(clean + "\n")
            self.lines_written += 1
            if self.echo is not None:
                self.echo(clean, style)
        self._fh.flush()


def stream_process(
    argv: list[str], log: BuildLog, *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> int:
    """Run a build command, streaming its merged stdout/stderr line by line into `log`; returns the
    exit code.

    It runs as a build session of its own (condapipe.build_session): Ctrl-Z pauses all of it, and
    an interruption (or condapipe's death, through the interrupt watcher) stops all of it, the
    compilers ninja starts in process groups of their own included."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        text=True,
        encoding="utf-8",
        errors="replace",
        bufsize=1,
        start_new_session=True,
    )
    try:
        with build_session.supervised(proc.pid):
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    log.write(line.rstrip("\n"))
                return proc.wait()
            except BaseException:
                build_session.stop(proc.pid, build_session.STOP_GRACE_S)
                proc.wait()
                raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()

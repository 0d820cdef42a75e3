"""Build logs: every line goes to the terminal as it happens and to a file kept for later.

Multi-hour builds fail far from where the user is looking; the file is what `diagnose` reads
and what a user attaches to a bug report, the terminal stream is how they watch progress.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.text import Text

from condapipe.cli.output import err_console

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
    """Tees lines to a log file and (optionally) the rich console on stderr."""

    def __init__(self, path: Path, *, echo: bool = True, console: Console | None = None) -> None:
        self.path = unique_path(path)
        self.echo = echo
        self.console = console or err_console
        self.lines_written = 0
        self._fh: TextIO | None = None

    def __enter__(self) -> BuildLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("w", encoding="utf-8", errors="replace")
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
            if self.echo:
                self.console.print(Text(clean, style=style or ""), soft_wrap=True)
        self._fh.flush()


def stream_process(
    argv: list[str], log: BuildLog, *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> int:
    """Run a command, streaming its merged stdout/stderr line by line into `log`; returns the exit code."""
    with subprocess.Popen(
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
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line.rstrip("\n"))
        return proc.wait()

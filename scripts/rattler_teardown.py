"""Ending a script that has loaded py-rattler: flush, then os._exit past the library's teardown.

Why: py-rattler 0.28 can crash the interpreter while it shuts down (SIGSEGV/SIGABRT in its runtime's
threads) after work that succeeded - 3 of 30 runs of fresh_env.py here - so the exit status would
say a good install failed. condapipe's own CLI ends the same way (condapipe.cli.main)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """Exit with `code` once stdout and stderr are flushed, running no interpreter teardown."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)

"""Scratch folders that an interrupt at any instant cannot leave behind.

condapipe's signal handler (condapipe.cli.interrupt) turns Ctrl-C, SIGTERM and SIGHUP into a
KeyboardInterrupt wherever Python happens to be, which may be inside the very `shutil.rmtree` of a
`finally:` that cleans up: the removal stops halfway and the folder stays (the round-4 fuzz campaign
found `.condapipe-verify-*` left in TMPDIR by a SIGTERM that way). So a scratch folder is made with
the three signals held back (pthread_sigmask; delivered right after), and removed by `remove_tree`,
which finishes the removal when interrupted and only then lets the interrupt go on.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back from this thread for the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _retry_writable(func: Callable[[str], object], failed: str, _exc: object) -> None:
    try:
        os.chmod(os.path.dirname(failed), 0o700)
        func(failed)
    except OSError:
        pass


def remove_tree(path: Path) -> None:
    """Remove a folder condapipe made, read-only subfolders included; an interrupt that arrives
    meanwhile is re-raised once the folder is gone (another thread may take the signal, so holding
    it back is not enough)."""
    interrupted: KeyboardInterrupt | None = None
    while True:
        try:
            if os.path.lexists(path):
                if sys.version_info >= (3, 12):
                    shutil.rmtree(path, onexc=_retry_writable)
                else:  # pragma: no cover - Python 3.11
                    shutil.rmtree(path, onerror=_retry_writable)
            break
        except KeyboardInterrupt as exc:
            interrupted = exc
        except OSError:
            break  # what cannot be removed (a file swapped for a link, no permission) stays
    if interrupted is not None:
        raise interrupted


@contextmanager
def scratch_dir(prefix: str, parent: Path | None = None, suffix: str = "") -> Iterator[Path]:
    """A fresh folder for the block, removed however the block ends (an interrupt included; a
    folder the block renamed into place is gone from here, so nothing is removed).

    The folder is made, and its name held, with the signals held back: an interrupt delivered
    when they are let go finds the name already known to the cleanup."""
    path: Path | None = None
    try:
        with deferred_signals():
            path = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
        yield path
    finally:
        if path is not None:
            remove_tree(path)

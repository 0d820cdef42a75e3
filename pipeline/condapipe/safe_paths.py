"""Guards for user-named paths, decided in one place: folders written into or replaced, files read.

An empty string silently means the current directory to `Path('')`, and `/` or `$HOME` as a
channel or recipe folder is always a typo with a large blast radius, so every command that
writes into a user-named folder asks `destination()` first, and every command that *replaces*
a folder asks `replaceable()` (never the current directory, one of its parents, `$HOME` or `/`).
A user-named file (config, catalog, token, package) is opened with `open_regular()`: anything but
a regular file is refused before it is opened, since reading a FIFO or a device never ends.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from condapipe.errors import UsageError


def destination(value: str | os.PathLike[str] | None, what: str) -> Path:
    """`value` as a folder condapipe may write into: not empty, not the filesystem root."""
    text = os.fspath(value) if value is not None else ""
    if not text.strip():
        raise UsageError(f"{what}: an empty path is not a folder (use . for the current directory)")
    if "\0" in text:
        raise UsageError(f"{what}: the path contains a NUL byte")
    path = Path(text)
    if _resolved(path) == Path("/"):
        raise UsageError(f"{what}: refusing to use the filesystem root {text!r}")
    return path


def replaceable(path: Path, what: str) -> Path:
    """`path` as a folder that may be deleted and replaced: none that holds the user's work."""
    destination(path, what)
    target = _resolved(path)
    cwd = _resolved(Path.cwd())
    if target == cwd or target in cwd.parents:
        raise UsageError(
            f"{what}: refusing to replace {path}: it is the current directory or one of its parents"
        )
    home = _home()
    if home is not None and target == _resolved(home):
        raise UsageError(f"{what}: refusing to replace {path}: it is the home directory")
    return path


def _home() -> Path | None:
    """The user's home folder as the system reports it (Path.home: $HOME, else the password entry)."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):  # no HOME and no password entry: nothing to protect by name
        return None


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: compare what we can
        return path.absolute()


@contextmanager
def open_regular(path: Path) -> Iterator[IO[bytes]]:
    """Open `path` for reading only if it is a regular file (a FIFO would block, a device never end)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path}: not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped between stat and open
            raise UsageError(f"{path}: not a regular file")
        yield fh


def read_regular_bytes(path: Path, *, max_bytes: int = 64 << 20) -> bytes:
    """The bytes of a user-named regular file (config, catalog, token), refusing others and huge ones."""
    with open_regular(path) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UsageError(f"{path}: larger than {max_bytes >> 20} MiB")
    return data


def read_head(path: Path, max_bytes: int) -> bytes | None:
    """At most `max_bytes` of a file facts are read from (/proc/meminfo, a driver version file);
    None when it is missing, unreadable or not a regular file: a device (/dev/zero, /dev/urandom)
    or FIFO never ends, so it is never read."""
    try:
        with open_regular(path) as fh:
            return fh.read(max_bytes)
    except (UsageError, OSError):
        return None


def env_file(environ: Mapping[str, str], name: str, default: str) -> Path:
    """The file environment variable `name` names instead of `default`, refused (UsageError) when
    it exists and is not a regular file: reading /dev/zero or a FIFO would never end."""
    value = environ.get(name)
    if not value:
        return Path(default)
    if "\0" in value:
        raise UsageError(f"${name}: the path contains a NUL byte")
    path = Path(value)
    try:
        st = os.stat(path)
    except OSError:
        return path  # missing: whoever reads it reports it missing
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"${name}: {_short(value)} is not a regular file (a device, FIFO or folder)")
    return path


def _short(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


# Files condapipe never replaces with generated output, --force or not: the user's own config.
PROTECTED_NAMES = frozenset({"condapipe.toml", "pyproject.toml"})


def output_file(value: str | os.PathLike[str] | None, what: str, *, force: bool) -> Path:
    """`value` as a file condapipe may write (temp name, then rename), checked before any work.

    The rule: an empty path is a usage error; a directory, device, FIFO or socket is never
    replaced; an existing regular file only with --force; a config file (condapipe.toml,
    pyproject.toml) never; the folder it goes into must exist."""
    text = os.fspath(value) if value is not None else ""
    if not text.strip():
        raise UsageError(f"{what}: an empty path is not a file name")
    if "\0" in text:
        raise UsageError(f"{what}: the path contains a NUL byte")
    path = Path(text)
    if path.name in PROTECTED_NAMES:
        raise UsageError(f"{what} {path}: refusing to write over a config file; name another file")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    # any other OSError (a file where a folder is needed, no permission) goes to the CLI's errno
    # mapping: one line with the path and the fix, exit 3, like every other unusable destination
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{what} {path}: is a directory; name a file")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what} {path}: not a regular file (a device, FIFO or socket); name a file")
        if not force:
            raise UsageError(f"{what} {path}: already exists; add --force to replace it")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{what} {path}: the folder {parent} does not exist")
    return path

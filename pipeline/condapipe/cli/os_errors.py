"""Every OSError a command meets, as one line: what happened, to which path, and the fix.

The CLI's one place for errno wording (condapipe.cli.main calls it for any OSError a stage did not
turn into its own error), so "Permission denied" or "Read-only file system" never reaches a user
as a raw errno text or a traceback, and never without the path it concerns.
"""

from __future__ import annotations

import errno
import os

# errno -> (what it means for the path, the fix). {path} is the path the call failed on.
_FIXES: dict[int, tuple[str, str]] = {
    errno.EACCES: (
        "permission denied",
        "make it writable (and its folder searchable) by you, or choose another path",
    ),
    errno.EPERM: ("operation not permitted", "check its owner and mode, or choose another path"),
    errno.EROFS: ("on a read-only file system", "choose a path on a writable disk"),
    errno.ENOSPC: (
        "no space left on the device",
        "free space there (`df -h`) or choose a path on a larger disk",
    ),
    errno.EDQUOT: ("disk quota exceeded", "free space in your quota or choose another disk"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "rename that file or choose another path"),
    errno.EISDIR: ("is a folder where a file was expected", "name a file, or remove the folder"),
    errno.EEXIST: ("already exists", "remove or rename it, or choose another path"),
    errno.ENOENT: ("does not exist", "create it or check the spelling"),
    errno.ENOTEMPTY: ("folder is not empty", "empty or remove it, or choose another path"),
    errno.ENAMETOOLONG: ("name too long", "choose a shorter path"),
    errno.ELOOP: ("too many symbolic links (a link loop?)", "fix the links in the path"),
    errno.EMFILE: ("too many open files", "raise the limit (`ulimit -n 4096`) and rerun"),
    errno.ENFILE: ("too many open files on this machine", "close other programs and rerun"),
    errno.EXDEV: ("cannot move across file systems", "keep --work-dir and --output-dir on one disk"),
    errno.EBUSY: ("is busy", "close what uses it and rerun"),
    errno.ETXTBSY: ("is a running program", "stop that program and rerun"),
    errno.EIO: ("input/output error", "check the disk (`dmesg`) and rerun"),
}


def os_error_line(exc: OSError) -> tuple[str, int]:
    """The one-line message for `exc` and its exit code (3: this machine's files, 1: anything else)."""
    path = exc.filename if exc.filename not in (None, "") else None
    other = exc.filename2 if exc.filename2 not in (None, "") else None
    code = exc.errno if isinstance(exc.errno, int) else None
    what, fix = _FIXES.get(code, (None, None)) if code is not None else (None, None)
    if code == errno.EEXIST and path and os.path.isfile(path):  # a folder was to be made where a file is
        what, fix = "is a file where a folder is needed", "rename that file or choose another path"
    if what is None:
        text = exc.strerror or str(exc)
        where = f"{path}: " if path else ""
        return f"error: {where}{text}", (3 if path else 1)
    where = f"{path} -> {other}" if path and other else (str(path) if path else "")
    head = f"{where}: {what}" if where else what
    return f"error: {head} (fix: {fix})", 3

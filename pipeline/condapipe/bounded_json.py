"""JSON that condapipe wrote and reads back (state files, --force journals), parsed with bounds.

Such a file sits in a work folder anyone with access can edit. Python's json module recurses once
per nesting level, so `[[[[…` a hundred thousand deep raises RecursionError (not a ValueError) and
would stop every later command; a huge file would be read whole. Both are refused here as a
ValueError, which every reader already treats as "unreadable, set aside".
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 32  # what condapipe writes is at most 4 deep
_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in `data`, strings skipped; linear time."""
    depth = deepest = 0
    for token in _STRUCTURE.finditer(data):
        char = token.group()
        if char in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif char in (b"]", b"}"):
            depth -= 1
    return deepest


def loads_bounded(data: bytes | str, *, max_bytes: int = 16 << 20, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads, refusing (ValueError) more than `max_bytes` or deeper nesting than `max_depth`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    if nesting_depth(raw) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(raw)
    except RecursionError:  # defence in depth: the scan above should make this unreachable
        raise ValueError("nested too deeply") from None

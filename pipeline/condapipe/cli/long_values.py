"""Long values in one-line messages, cut to a readable length.

A message repeats the value it refuses (a flag's value, a path) so the user sees what was wrong; a
100,000-character value repeated whole buries the message and fills logs. Every failure line the CLI
prints passes through `shortened`: each run of non-space characters longer than LONGEST keeps its
head and says how long it was.
"""

from __future__ import annotations

import re

LONGEST = 400  # longer than any path a user really has; shorter than a pasted blob
_KEEP = 100
_LONG_RUN = re.compile(rf"\S{{{LONGEST + 1},}}")


def _cut(match: re.Match[str]) -> str:
    text = match.group()
    return f"{text[:_KEEP]}…[{len(text)} characters]"


def shortened(message: str) -> str:
    """`message` with every over-long value cut to its first characters and its length."""
    return _LONG_RUN.sub(_cut, message)

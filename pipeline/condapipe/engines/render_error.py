"""An engine's render error as one line a recipe author can act on.

py-rattler-build reports a render failure as "Render error: " plus the Rust Debug dump of its
error value (`Parse(JinjaError { message: "...", span: Span { ... line: 3 ... } })`). The author
needs the message and the line, not the dump: this keeps the engine's own words, trimmed.
"""

from __future__ import annotations

import re

MAX_CHARS = 300
_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
_LINE = re.compile(r"\bline: (\d+)")
_VARIANT = re.compile(r"^([A-Z][A-Za-z]*)\s*[{(]\s*(.*?)\s*[})]$", re.S)
_FIELD = re.compile(r'(\w+): "((?:[^"\\]|\\.)*)"')


def _words(name: str) -> str:
    """`MissingOutput` -> "missing output"."""
    return re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower()


def engine_message(text: str) -> str:
    """The engine's message of `text`, one line, at most MAX_CHARS characters."""
    body = text.strip()
    body = re.sub(r"^(?:Render error|Error):\s*", "", body)
    message = _MESSAGE.search(body)
    line = _LINE.search(body)
    if message:
        shown = message.group(1).replace('\\"', '"').replace("\\n", " ")
    else:
        variant = _VARIANT.match(body)
        if variant and "{" in body:
            fields = ", ".join(f"{key} {value}" for key, value in _FIELD.findall(variant.group(2)))
            shown = _words(variant.group(1)) + (f": {fields}" if fields else "")
        else:
            shown = body
    shown = " ".join(shown.split())
    if line and f"line {line.group(1)}" not in shown:
        shown += f" (line {line.group(1)})"
    return shown if len(shown) <= MAX_CHARS else shown[: MAX_CHARS - 1] + "…"

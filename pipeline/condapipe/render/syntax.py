"""How model conditions and ``{{ key }}`` refs are spelled in each recipe format and in bash.

v0 (conda-build) writes conditions as line selectors (``# [linux64 and py>=39]``), v1
(rattler-build) as ``if:`` expressions (``linux and x86_64 and match(python, ">=3.9")``); build.sh
reads variant keys from its environment. Keeping the spelling here means the two writers cannot
drift apart on what a condition means.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from condapipe.errors import UsageError
from condapipe.render.model import VARIANT_REF, When

# Target platform -> (v0 selector, v1 expression).
_PLATFORM_WORDS: dict[str, tuple[str, str]] = {
    "linux-64": ("linux64", "(linux and x86_64)"),
    "linux-aarch64": ("aarch64", "(linux and aarch64)"),
}

_PY_VERSION = re.compile(r"^(\d+)\.(\d+)$")


def _py_int(version: str) -> str:
    """ "3.10" -> "310", the integer form conda-build's `py` selector compares against."""
    match = _PY_VERSION.match(version.strip().rstrip(".*"))
    if not match:
        raise UsageError(f"python condition needs a MAJOR.MINOR version, got {version!r}")
    return f"{match.group(1)}{match.group(2)}"


def _either(words: list[str]) -> str:
    return words[0] if len(words) == 1 else "(" + " or ".join(words) + ")"


def selector_v0(when: When) -> str:
    """The conda-build line selector for `when` (without ``# [ ]``); "" when always true."""
    parts: list[str] = []
    if when.platforms:
        parts.append(_either([_PLATFORM_WORDS[p][0] for p in when.platforms]))
    for spec in sorted(SpecifierSet(when.python), key=str) if when.python else ():  # stable order
        operator = "==" if spec.operator == "===" else spec.operator
        parts.append(f"py{operator}{_py_int(spec.version)}")
    if when.cuda:
        parts.append(_either([f'cuda_version == "{c}"' for c in when.cuda]))
    return " and ".join(parts)


def condition_v1(when: When) -> str:
    """The rattler-build ``if:`` expression for `when`; "" when always true."""
    parts: list[str] = []
    if when.platforms:
        parts.append(_either([_PLATFORM_WORDS[p][1] for p in when.platforms]))
    if when.python:
        parts.append(f'match(python, "{when.python}")')
    if when.cuda:
        parts.append(_either([f'cuda_version == "{c}"' for c in when.cuda]))
    return " and ".join(parts)


def jinja_v1(text: str) -> str:
    """Model ``{{ key }}`` refs -> rattler-build ``${{ key }}``."""
    return VARIANT_REF.sub(lambda m: "${{ " + m.group(1) + " }}", text)


def jinja_v0(text: str) -> str:
    """Model ``{{ key }}`` refs -> conda-build Jinja, normalised to ``{{ key }}``."""
    return VARIANT_REF.sub(lambda m: "{{ " + m.group(1) + " }}", text)


def bash_value(text: str) -> str:
    """A double-quoted bash word for `text`, with ``{{ key }}`` refs read from the environment."""
    out: list[str] = []
    pos = 0
    for match in VARIANT_REF.finditer(text):
        out.append(_bash_escape(text[pos : match.start()]))
        out.append("${" + match.group(1) + "}")
        pos = match.end()
    out.append(_bash_escape(text[pos:]))
    return '"' + "".join(out) + '"'


def _bash_escape(literal: str) -> str:
    return re.sub(r'(["\\$`])', r"\\\1", literal)

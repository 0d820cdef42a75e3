"""How an rpath value reads: its entries and the `$ORIGIN` forms (used by fix and verify alike)."""

from __future__ import annotations

ORIGIN_PREFIXES = ("$ORIGIN", "${ORIGIN}")


def split_rpath(value: str | None) -> list[str]:
    """The entries of an rpath/runpath value, empty ones dropped."""
    return [e for e in (value or "").split(":") if e]

"""Deterministic YAML dumping for rendered recipes (ruamel.yaml, fixed style, strings quoted)."""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import DoubleQuotedScalarString


def _quote_strings(data: Any) -> Any:
    """Quote every string, so "2.10", "11.0" or "yes" stay strings in any YAML reader."""
    if isinstance(data, dict):
        return {k: _quote_strings(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_quote_strings(v) for v in data]
    if isinstance(data, str):
        return DoubleQuotedScalarString(data)
    return data


def dump_yaml(data: Any, *, quote: bool = True) -> str:
    """`data` as block-style YAML with stable key order and no line wrapping."""
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    stream = io.StringIO()
    yaml.dump(_quote_strings(data) if quote else data, stream)
    return stream.getvalue()

"""inputchannels: local conda channels of build inputs, made from PyPI wheels before a build.

`--build-tools wheels` lays cmake and ninja out as conda packages (`tool_channel`); `condapipe
wheels` does the same for a set of wheels a family builds against (`wheel_channel`). Both sit
below render: they make what a build reads, and publish only what a build made.

Entry points: `make_tool_channel`, `make_wheel_channel`; modules load on first use (PEP 562), so a
build without `--build-tools wheels` imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from condapipe.inputchannels.tool_channel import make_tool_channel
    from condapipe.inputchannels.wheel_channel import make_wheel_channel

__all__ = ["make_tool_channel", "make_wheel_channel"]


def __getattr__(name: str) -> Any:
    """An entry point, from its module (imported on this first use)."""
    if name == "make_tool_channel":
        from condapipe.inputchannels import tool_channel

        return tool_channel.make_tool_channel
    if name == "make_wheel_channel":
        from condapipe.inputchannels import wheel_channel

        return wheel_channel.make_wheel_channel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

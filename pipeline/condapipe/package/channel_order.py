"""The order a build searches its channels in, decided here and nowhere else.

The output dir comes first, so a package built here wins over one of the same name elsewhere (as
conda-build's `local` channel and rattler-build's output dir do); then the channels the caller
gives, in their order: a build's dependency channels (-c, else the config file's `channels`, else
data/channels.yaml's defaults) followed by the `--build-tools wheels` tool channel, as
condapipe.plan.build_channels.channels_in_use lists them. Nothing implicit (conda-forge) is added
here, and each channel is searched once. The engines, the resolve step, the package tests, the
probes and `condapipe env` all take their list from search_order.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def search_order(output_dir: Path, channels: Iterable[str]) -> tuple[str, ...]:
    """`output_dir` (resolved) first, then `channels` in their order, each once."""
    order = [str(output_dir.resolve())]
    for channel in channels:
        if channel not in order:
            order.append(channel)
    return tuple(order)

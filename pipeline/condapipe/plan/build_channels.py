"""The channels a build searches, and whether each one answers.

One place decides the channel list (the defaults of data/channels.yaml unless -c or the config
file name others; the tool channel; `--offline` keeps the local ones) and probes each channel
once with py-rattler's gateway, with a short timeout. A remote channel that cannot be reached is
reported as unreachable, never as "package not found", and the build goes on without it only when
nothing it needs would come from there (condapipe.plan.resolve decides).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from condapipe.errors import UsageError
from condapipe.package.channel_order import search_order

# A name no channel has: probing with it fetches a channel's index (or shard index) and nothing more.
_PROBE_NAME = "condapipe-channel-probe"
# rattler's error texts for a network that does not answer (DNS, refused, reset, timed out, TLS).
_UNREACHABLE = (
    "error sending request",
    "dns error",
    "Connection refused",
    "timed out",
    "Connection reset",
    "tcp connect error",
    "client error (Connect)",
    "Network is unreachable",
)


@cache
def channel_data() -> Mapping[str, Any]:
    """data/channels.yaml: default channels, timeout, key packages, fixes for missing packages."""
    text = resources.files("condapipe.data").joinpath("channels.yaml").read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


def is_remote(channel: str) -> bool:
    """A channel reached over the network: a URL other than file://, or a name (conda-forge)."""
    if channel.startswith("file://"):
        return False
    if "://" in channel:
        return True
    return not (channel.startswith(("/", ".", "~")) or os.sep in channel or Path(channel).exists())


def dependency_channels(given: Sequence[str]) -> tuple[str, ...]:
    """The channels dependencies come from: `given` (-c, else the config file's `channels`), else
    the defaults of data/channels.yaml; a given list replaces the defaults, as in rattler-build."""
    return tuple(given) if given else tuple(str(c) for c in channel_data()["default_channels"])


def channels_in_use(
    given: Sequence[str], *, tool_channel: str | None = None, offline: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the dependency channels of a build, the remote ones --offline left out), in search order.

    `given` are the -c channels, else the config file's; when empty the defaults of
    data/channels.yaml are used (dependency_channels), then the tool channel. Local paths are made
    absolute. The output dir is not listed: condapipe.package.channel_order.search_order puts it first.
    """
    chosen = list(dependency_channels(given))
    if tool_channel:
        chosen.append(tool_channel)
    out: list[str] = []
    for chan in chosen:
        if not chan.strip():
            raise UsageError("an empty channel name was given (-c '')")
        if not is_remote(chan) and not chan.startswith("file://"):
            chan = str(Path(chan).expanduser().absolute())
        if chan not in out:
            out.append(chan)
    if not offline:
        return tuple(out), ()
    return tuple(c for c in out if not is_remote(c)), tuple(c for c in out if is_remote(c))


_timeout: list[float] = []  # the command's (its Settings.channel_timeout), set by use_channel_timeout


def use_channel_timeout(seconds: float | None) -> None:
    """The command's channel timeout, from its settings (CONDAPIPE_CHANNEL_TIMEOUT); None: the data's.
    A gateway made before keeps the timeout it was made with, so the next one is made anew."""
    _timeout[:] = [seconds] if seconds is not None else []
    _gateway.clear()


def channel_timeout() -> float:
    """Seconds a remote channel may take to answer: the command's setting, else data/channels.yaml's."""
    return _timeout[0] if _timeout else float(channel_data()["channel_timeout_s"])


_gateway: list[Any] = []  # the command's gateway (new_gateway starts one per command)


def gateway() -> Any:
    """The command's py-rattler Gateway (new_gateway() makes it when there is none yet)."""
    return _gateway[0] if _gateway else new_gateway()


def new_gateway() -> Any:
    """A fresh py-rattler Gateway for this command.

    Requests give up after channel_timeout() seconds, and each channel's index is fetched once
    and kept in memory (probe, prerequisite lookup and solves share it; a new command sees the
    channels as they are now). No disk cache: py-rattler 0.28 revalidating a cached sharded index
    (repodata_shards.msgpack.zst, which its own indexer writes) fails on the server's "304 Not
    Modified" ("received unexpected status code"), e.g. with any static file server.
    """
    import rattler

    client = rattler.Client(timeout=max(1, round(channel_timeout())))
    made = rattler.Gateway(client=client, default_config=rattler.SourceConfig(cache_action="no-cache"))
    _gateway[:] = [made]
    return made


class ChannelTimeout(OSError):
    """A channel gave no complete answer within channel_timeout() seconds, all requests together."""


async def within_deadline(query: Any) -> Any:
    """`query`, given up after channel_timeout() seconds in all.

    The client's timeout bounds one request; a channel's index is several (sharded index, then
    repodata.json, each after a name lookup), so a network that swallows packets could hold a dry
    run for minutes. This bounds the whole question.
    """
    limit = channel_timeout()
    try:
        return await asyncio.wait_for(query, timeout=limit)
    except asyncio.TimeoutError:
        raise ChannelTimeout(f"no answer within {limit:g} s (operation timed out)") from None


@dataclass(frozen=True)
class ChannelStatus:
    """One channel in use, as probed: where it is, whether it answered, and what went wrong."""

    channel: str  # as the engines get it: an absolute path, a URL or a name
    url: str  # rattler's base URL for it
    remote: bool
    state: str  # "ok" | "empty" (a local folder that is not a channel yet) | "unreachable" | "error"
    detail: str = ""  # the error's cause, one line

    @property
    def usable(self) -> bool:
        return self.state == "ok"

    def describe(self) -> str:
        """`URL (reachable)`, `URL (unreachable: dns error ...)`, ... for messages."""
        where = "remote" if self.remote else "local"
        label = {"ok": "reachable", "empty": "no packages yet"}.get(self.state, self.state)
        text = f"{self.url} ({where}, {label}"
        return text + (f": {self.detail})" if self.detail else ")")

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "url": self.url,
            "remote": self.remote,
            "state": self.state,
            "detail": self.detail,
        }


def _cause(exc: BaseException) -> str:
    """rattler's error chain ("error sending request ...\\nCaused by: ...") as its last two causes."""
    lines = [
        line.strip().removeprefix("Caused by:").strip() for line in str(exc).splitlines() if line.strip()
    ]
    if not lines:
        return type(exc).__name__
    return "; ".join(lines[-2:]) if len(lines) > 1 else lines[0]


def classify(exc: BaseException) -> str:
    """ "unreachable" for a network that did not answer, else "error" (not a channel, bad URL, ...)."""
    text = str(exc)
    return "unreachable" if any(marker in text for marker in _UNREACHABLE) else "error"


def probe_channels(channels: Sequence[str], platform: str) -> tuple[ChannelStatus, ...]:
    """Ask every channel for its index (one name, not recursive): whether it answers, in parallel."""
    import rattler
    from rattler.exceptions import CacheDirError, FetchRepoDataError, GatewayError, InvalidChannelError

    errors = (GatewayError, FetchRepoDataError, InvalidChannelError, CacheDirError, OSError, ValueError)

    def status(chan: str, exc: BaseException | None) -> ChannelStatus:
        remote = is_remote(chan)
        url = _base_url(chan)
        if exc is None:
            return ChannelStatus(chan, url, remote, "ok")
        if not remote and _not_a_channel_yet(chan):
            return ChannelStatus(chan, url, remote, "empty")
        return ChannelStatus(chan, url, remote, classify(exc), _cause(exc))

    async def one(gw: Any, chan: str) -> ChannelStatus:
        if not is_remote(chan) and _not_a_channel_yet(chan):
            return status(chan, FileNotFoundError(chan))
        query = gw.query([rattler.Channel(chan)], [platform, "noarch"], [_PROBE_NAME], recursive=False)
        try:
            await within_deadline(query)
        except errors as exc:
            return status(chan, exc)
        return status(chan, None)

    async def all_of() -> list[ChannelStatus]:
        gw = gateway()
        return list(await asyncio.gather(*(one(gw, chan) for chan in channels)))

    return tuple(asyncio.run(all_of())) if channels else ()


def _not_a_channel_yet(chan: str) -> bool:
    """A local folder without any <subdir>/repodata.json (the output dir before the first build)."""
    path = Path(chan.removeprefix("file://"))
    return not any(path.glob("*/repodata.json"))


def _base_url(chan: str) -> str:
    try:
        import rattler

        return str(rattler.Channel(chan).base_url).rstrip("/")
    except Exception:
        return chan


@dataclass(frozen=True)
class ChannelSetup:
    """The channels of one build: the list the engines get, each one's probe, what --offline left out."""

    channels: tuple[str, ...]  # dependency channels in search order (the output dir comes before them)
    statuses: tuple[ChannelStatus, ...]  # the output dir first, then `channels`
    offline_dropped: tuple[str, ...] = ()
    # (name, version) of the packages the tool channel will hold, when a dry run did not write it
    planned_tools: tuple[tuple[str, str], ...] = ()

    @property
    def unreachable(self) -> tuple[str, ...]:
        return tuple(c.channel for c in self.statuses if c.state == "unreachable")


def prepare_channels(
    output_dir: Path,
    given: Sequence[str],
    *,
    tool_channel: str | None = None,
    offline: bool = False,
    planned_tools: Sequence[tuple[str, str]] = (),
) -> ChannelSetup:
    """channels_in_use, then every channel probed (the output dir included) for this machine's subdir."""
    import rattler

    channels, dropped = channels_in_use(given, tool_channel=tool_channel, offline=offline)
    new_gateway()  # this command's view of the channels
    statuses = probe_channels(list(search_order(output_dir, channels)), str(rattler.Subdir.current()))
    return ChannelSetup(channels, statuses, dropped, tuple(planned_tools))

"""publish: local channels (lock, atomic copy; indexed by the package library) and anaconda.org upload.

Entry points: `publish_packages` (verified packages -> a local channel, indexed through the package
library's condapipe.package.channel_index), `upload_to_anaconda` / `upload_to_directory` (the upload
command), `resolve_token`; outcomes are `FileOutcome` with a `Status`.

The names load on first use (PEP 562): a local build imports the channel module without upload's
HTTP client stack (requests, urllib3), which would add a tenth of a second to every command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from condapipe.publish.local_channel import publish_packages
    from condapipe.publish.tokens import Token, resolve_token
    from condapipe.publish.upload import upload_to_anaconda, upload_to_directory
    from condapipe.publish.upload_result import FileOutcome, Status

__all__ = [
    "FileOutcome",
    "Status",
    "Token",
    "publish_packages",
    "resolve_token",
    "upload_to_anaconda",
    "upload_to_directory",
]


def __getattr__(name: str) -> Any:
    """An entry point, from its module (imported on this first use)."""
    if name == "publish_packages":
        from condapipe.publish import local_channel

        return getattr(local_channel, name)
    if name in ("Token", "resolve_token"):
        from condapipe.publish import tokens

        return getattr(tokens, name)
    if name in ("upload_to_anaconda", "upload_to_directory"):
        from condapipe.publish import upload

        return getattr(upload, name)
    if name in ("FileOutcome", "Status"):
        from condapipe.publish import upload_result

        return getattr(upload_result, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""publish: local channels (lock, atomic copy, index) and anaconda.org upload.

Entry points: `publish_packages` (verified packages -> a local channel, indexed), `ensure_channel`
and `index_channel` (py-rattler index), `upload_to_anaconda` / `upload_to_directory` (the upload
command), `resolve_token`; outcomes are `FileOutcome` with a `Status`.
"""

from condapipe.publish.channel import ensure_channel, index_channel, publish_packages
from condapipe.publish.tokens import Token, resolve_token
from condapipe.publish.upload import upload_to_anaconda, upload_to_directory
from condapipe.publish.upload_result import FileOutcome, Status

__all__ = [
    "FileOutcome",
    "Status",
    "Token",
    "ensure_channel",
    "index_channel",
    "publish_packages",
    "resolve_token",
    "upload_to_anaconda",
    "upload_to_directory",
]

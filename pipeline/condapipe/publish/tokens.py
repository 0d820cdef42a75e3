"""Anaconda tokens: where they come from, and keeping them out of every output.

A token is a credential that grants write access to a whole organisation. It must never
appear in argv (visible in `ps`), logs, exception messages, --debug output or reports, so it
is carried in a `Token` whose repr/str are redacted, and every text that leaves condapipe on
the upload path goes through `redact`.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from condapipe.errors import UsageError
from condapipe.process_settings import TOKEN_ENV_VARS  # anaconda-client's order (BINSTAR_ wins)

REDACTED = "<redacted>"


@dataclass(frozen=True)
class Token:
    """A secret plus where it came from; printing it shows only the source."""

    value: str = field(repr=False)
    source: str

    def __str__(self) -> str:
        return f"token from {self.source}"

    def __repr__(self) -> str:
        return f"Token(source={self.source!r}, value={REDACTED!r})"


def read_token_file(path: Path) -> Token:
    """Read a token file, refusing one that other users can read (it would leak the token)."""
    try:
        info = path.stat()
    except OSError as exc:
        raise UsageError(f"token file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"token file {path} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise UsageError(
            f"token file {path} is readable by group or others (mode {mode:04o}); run: chmod 600 {path}"
        )
    try:
        value = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"token file {path} cannot be read: {type(exc).__name__}") from None
    if not value or any(ch.isspace() for ch in value):
        raise UsageError(f"token file {path} must hold exactly one token on one line")
    return Token(value, f"token file {path}")


def stored_login_token(site_url: str) -> Token | None:
    """The token `anaconda login` stored for this site, if any (anaconda-client's own lookup)."""
    from binstar_client.utils.config import load_token

    try:
        value = load_token(site_url)
    except (OSError, ValueError):  # an unreadable or undecodable login store is the same as no login
        return None
    return Token(value.strip(), "anaconda-client stored login") if value and value.strip() else None


def resolve_token(site_url: str, token_file: Path | None, environ: Mapping[str, str]) -> Token | None:
    """Pick the token: --token-file, then BINSTAR_API_TOKEN, ANACONDA_API_TOKEN in `environ` (the
    command's Settings.environ; the settings' ENVIRONMENT table declares both), then the stored login."""
    if token_file is not None:
        return read_token_file(token_file)
    for name in TOKEN_ENV_VARS:
        value = environ.get(name, "").strip()
        if value:
            return Token(value, f"${name}")
    return stored_login_token(site_url)


def redact(text: str, secrets: Iterable[str | Token | None]) -> str:
    """Replace every secret in text by <redacted>."""
    for secret in secrets:
        value = secret.value if isinstance(secret, Token) else secret
        if value and len(value) >= 4:
            text = text.replace(value, REDACTED)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs secrets from the formatted message and its arguments."""

    def __init__(self, secrets: Iterable[str | Token | None]) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message, self._secrets)
        record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            # Formatters reuse exc_text when it is set, so the traceback is printed scrubbed.
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info), self._secrets)
        return True

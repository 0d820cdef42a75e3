"""Values that name things on a channel server, or that could carry a secret, checked in one place.

Owners, labels and channels travel into API paths, engine command lines and generated CI
workflows, so each is held to what anaconda.org and conda accept (data/value_rules.yaml, from
CEP 26) before anything is written or sent. Secrets are taken only from the environment or from
files: a URL with a password, a conda `/t/TOKEN/` channel, or a credential-named setting
(`*_TOKEN`, `*_PASSWORD`, `AWS_SECRET_ACCESS_KEY` …) given as a flag or in the config file is
refused with the way to pass it. No message here ever repeats the refused value's secret part.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import SplitResult, urlsplit

from ruamel.yaml import YAML

from condapipe.errors import UsageError

_MAX_HOST = 253  # RFC 1035: a host name, and each of its labels
_MAX_LABEL = 63


@cache
def _rules() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("value_rules.yaml").read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


def _matches(kind: str, value: str) -> bool:
    rule = _rules()[kind]
    return len(value) <= rule["max_length"] and re.fullmatch(rule["pattern"], value) is not None


def _shown(value: str) -> str:
    """A value for a message: printable, and short (a 3,000-character value is not repeated)."""
    text = value if len(value) <= 80 else value[:77] + "..."
    return repr(text)


def is_owner_name(value: str) -> bool:
    return _matches("owner", value)


def is_label_name(value: str) -> bool:
    return _matches("label", value)


def check_owner(value: str, what: str = "--channel") -> str:
    """An anaconda.org owner (user or organisation): letters, digits, `_`, `.`, `-` (CEP 26)."""
    if not _matches("owner", value):
        raise UsageError(
            f"{what} {_shown(value)}: not an anaconda.org owner name (letters, digits, '_', '.', '-'; "
            f"starting with a letter, digit or '_'; at most {_rules()['owner']['max_length']} characters)"
        )
    return value


def check_label(value: str, what: str = "--label") -> str:
    """An anaconda.org label (CEP 26: a letter, then letters, digits, `_`, `-`, `.`, `/`)."""
    if not _matches("label", value):
        raise UsageError(
            f"{what} {_shown(value)}: not a channel label (a letter, then letters, digits, _ - . /)"
        )
    return value


_PACKAGE_PARTS = {
    "package_name": "a conda package name (letters, digits, _ . -)",
    "package_version": "a conda package version (letters, digits, _ . ! +)",
    "package_build": "a conda build string (letters, digits, _ . +)",
    "pypi_name": "a PyPI distribution name (letters, digits, _ . -)",
}


def check_package_part(kind: str, value: object, what: str) -> str:
    """A name, version or build string read from a wheel, package or archive, checked before it
    becomes part of a file name: `kind` is package_name, package_version, package_build or pypi_name."""
    text = value if isinstance(value, str) else str(value)
    if not _matches(kind, text):
        limit = _rules()[kind]["max_length"]
        raise UsageError(f"{what} {_shown(text)}: not {_PACKAGE_PARTS[kind]}, at most {limit} characters")
    return text


def parse_url(value: str, what: str) -> SplitResult:
    """`value` split as a URL, or a one-line UsageError (a broken `[` host, a bad port, a host
    label longer than DNS allows) — never Python's own ValueError."""
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise UsageError(f"{what}: not a valid URL ({exc})") from None
    if any(ord(c) < 32 or c == "\x7f" or c.isspace() for c in value):
        raise UsageError(f"{what}: a URL cannot contain spaces or control characters")
    if host and not host.startswith("[") and ":" not in host:
        labels = host.rstrip(".").split(".")
        if len(host) > _MAX_HOST or any(len(label) > _MAX_LABEL or not label for label in labels):
            raise UsageError(
                f"{what}: the host name is not valid (each dot-separated part 1-{_MAX_LABEL} characters, "
                f"at most {_MAX_HOST} in all)"
            )
    return parts


def refuse_url_credentials(parts: SplitResult, what: str, fix: str) -> None:
    """A URL that can carry a secret is refused with `fix`: a user name or password, a query
    (`?password=…`, `?aws_secret_access_key=…`, `?token=…`) or fragment (`#…`), which nothing
    condapipe sends a URL to needs, or a conda `/t/TOKEN/` path. The message names the part,
    never its value."""
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise UsageError(f"{what}: credentials do not belong in a URL; {fix}")
    for part, mark in (("query", "?"), ("fragment", "#")):
        if getattr(parts, part):
            raise UsageError(
                f"{what}: a URL with a {part} ({mark}…) is not taken: it can carry a secret and no store, "
                f"channel or site condapipe talks to needs one; {fix}"
            )
    segments = parts.path.split("/")
    token_mark = _rules()["token_path_segment"]
    if token_mark in segments[:-1] and segments.index(token_mark) < len(segments) - 1:
        raise UsageError(f"{what}: the URL carries a token (/{token_mark}/…/); {fix}")


CHANNEL_TOKEN_FIX = (
    "give the channel without it and let conda/rattler read the token from their own login "
    "(`anaconda login`, `pixi auth login`) or the environment"
)


def check_channel(value: str, what: str = "--channel") -> str:
    """A conda channel: a name (conda-forge, pytorch/label/nightly), a URL (http, https, file)
    without credentials, or a local folder (starts with `/`, `./`, `../` or `~`)."""
    rules = _rules()
    if not value or len(value) > rules["channel_max_length"]:
        raise UsageError(f"{what} {_shown(value)}: expected a channel name, URL or folder")
    if any(ord(c) < 32 or c == "\x7f" for c in value):
        raise UsageError(f"{what}: a channel cannot contain control characters or line breaks")
    if "://" in value:
        parts = parse_url(value, what)
        if parts.scheme.lower() not in rules["channel_url_schemes"]:
            schemes = ", ".join(f"{s}://" for s in rules["channel_url_schemes"])
            raise UsageError(f"{what}: unsupported channel URL scheme {parts.scheme!r} (use {schemes})")
        refuse_url_credentials(parts, what, CHANNEL_TOKEN_FIX)
        return value
    if value.startswith(("/", "./", "../", "~")) or value in (".", ".."):
        return value  # a local folder: any name the filesystem allows; it reaches no shell
    components = value.split("/")
    if not all(_matches("channel_component", c) for c in components):
        raise UsageError(
            f"{what} {_shown(value)}: not a channel name (parts of letters, digits, '_', '.', '-' "
            "joined by '/'); a local folder starts with ./ or /"
        )
    return value


def is_secret_name(name: str) -> bool:
    """True for an environment setting whose value is a credential (data/value_rules.yaml)."""
    rules = _rules()["secret_env"]
    upper = name.upper()
    return upper in rules["names"] or upper.endswith(tuple(rules["suffixes"]))


def check_env_entry(name: str, value: str, where: str) -> None:
    """An environment setting given in `where` (`--env`, `[env] in condapipe.toml`): never a secret.

    Refused: a credential-named setting, and a value that is a URL with a password. The message
    names the setting, never its value."""
    if is_secret_name(name):
        raise UsageError(
            f"{where}: {name} is a secret and is not taken from here; export {name} in the environment "
            "condapipe runs in (sccache and AWS settings reach the build by name, their values never "
            "enter the recipe)"
        )
    if "://" in value:
        try:
            parts = urlsplit(value)
            has_password = parts.password is not None
        except ValueError:
            return
        if has_password or _credential_in(parts.query) or _credential_in(parts.fragment):
            raise UsageError(
                f"{where}: {name} holds a URL with a password or token (in its user part, query or "
                "fragment); put it in its own environment variable (e.g. SCCACHE_REDIS_PASSWORD) "
                "and leave it out of the URL"
            )


_CREDENTIAL_WORDS = re.compile(r"pass|pwd|token|secret|key|sig|credential|auth", re.IGNORECASE)


def _credential_in(part: str) -> bool:
    """True when a query or fragment names a credential (`password=`, `X-Amz-Signature=`, `token`):
    an environment value may rightly carry a plain query, never one of those."""
    names = [field.split("=", 1)[0] for field in re.split(r"[&;]", part) if field]
    return any(_CREDENTIAL_WORDS.search(name) for name in names)


def without_credentials(value: str | None) -> str | None:
    """`value` for printing: a URL's user name and password replaced by `***` (an environment
    setting may rightly hold one; `config show` must still not print it)."""
    if not value or "@" not in value or "://" not in value:
        return value
    try:
        parts = urlsplit(value)
        if parts.username is None and parts.password is None:
            return value
        host = parts.netloc.rsplit("@", 1)[1]
    except ValueError:
        return "<a URL that does not parse>"
    return parts._replace(netloc=f"***@{host}").geturl()

"""The anaconda.org upload API, spoken through anaconda-client's library (`binstar_client`).

anaconda-client's `Binstar.upload()` does stage → storage POST → commit in one call, with no
timeouts, a progress bar on stderr and the commit sent over a keep-alive connection that sat
idle during the whole file upload (a known cause of failures on 0.5–2 GB files). This module
keeps binstar_client for everything else (sessions, headers, status → exception mapping,
package inspection) and splits that step so the caller can retry it and commit on a fresh
connection. Protocol facts: docs/reference/anaconda-upload-protocol.md.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from requests.adapters import HTTPAdapter

from condapipe.package.io import READ_ERRORS, PackageInfo
from condapipe.publish.tokens import Token, redact

DEFAULT_SITE_URL = "https://api.anaconda.org"
API_TIMEOUT_S = 60.0
STORAGE_TIMEOUT_S = (30.0, 3600.0)  # connect, read: the storage answers only after the whole body
# Seconds before a silent API or storage connection counts as failed (and is retried). The default
# suits anaconda.org; fault-injection runs set it low so stalls resolve fast.


class Failure(str, enum.Enum):
    """Why a step failed; decides whether retrying can help."""

    AUTH = "auth"  # 401/403: wrong token or no write access
    QUOTA = "quota"  # 402: storage quota exceeded
    CONFLICT = "conflict"  # 409: the file exists on the server
    NOT_FOUND = "not-found"
    BAD_REQUEST = "bad-request"
    SERVER = "server"  # 5xx
    NETWORK = "network"  # reset, refused, timeout
    STORAGE = "storage"  # the file upload was rejected (bad digest, expired policy, ...)
    STALE = "stale"  # the server forgot our stage (commit: "Invalid dist_id"): start the file over
    CLIENT = "client"  # a local error (unreadable file, library misuse): retrying cannot help

    @property
    def retryable(self) -> bool:
        return self in (Failure.SERVER, Failure.NETWORK, Failure.STORAGE)


class ApiError(Exception):
    """An upload step failed; the message never contains the token."""

    def __init__(self, kind: Failure, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status

    @property
    def retryable(self) -> bool:
        return self.kind.retryable


_STATUS_KIND: dict[int, Failure] = {
    400: Failure.BAD_REQUEST,
    401: Failure.AUTH,
    402: Failure.QUOTA,
    403: Failure.AUTH,
    404: Failure.NOT_FOUND,
    408: Failure.NETWORK,
    409: Failure.CONFLICT,
    422: Failure.BAD_REQUEST,
    429: Failure.SERVER,
}


def classify(exc: BaseException, token: Token | None, step: str) -> ApiError:
    """Turn a binstar_client or requests exception into an ApiError with a scrubbed message."""
    from binstar_client.errors import BinstarError

    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BinstarError):
        args: tuple[object, ...] = tuple(getattr(exc, "args", ()))
        message = str(args[0]) if args else str(exc)
        status = args[1] if len(args) > 1 and isinstance(args[1], int) else None
        kind = _STATUS_KIND.get(
            status or 0, Failure.SERVER if (status or 500) >= 500 else Failure.BAD_REQUEST
        )
        return ApiError(kind, redact(f"{step}: {message}", [token]), status)
    if isinstance(exc, requests.Timeout):
        return ApiError(Failure.NETWORK, f"{step}: timed out ({type(exc).__name__})")
    if isinstance(exc, (requests.ConnectionError, requests.exceptions.ChunkedEncodingError, ConnectionError)):
        return ApiError(Failure.NETWORK, f"{step}: connection failed ({type(exc).__name__})")
    if isinstance(exc, requests.RequestException):
        return ApiError(Failure.NETWORK, f"{step}: {type(exc).__name__}")
    return ApiError(Failure.CLIENT, redact(f"{step}: {type(exc).__name__}: {exc}", [token]))


def _transport_errors() -> tuple[type[Exception], ...]:
    """What a failed call through binstar_client or requests raises (classify() sorts them)."""
    from binstar_client.errors import BinstarError

    return (BinstarError, requests.RequestException, OSError)


class _TimeoutAdapter(HTTPAdapter):
    """binstar_client sends API calls without a timeout; a hung server must not hang a batch."""

    def __init__(self, timeout: float) -> None:
        super().__init__(max_retries=0)
        self._timeout = timeout

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self._timeout
        return super().send(request, **kwargs)


@dataclass(frozen=True)
class AnacondaMeta:
    """A package as anaconda.org sees it: the attributes anaconda-client would send."""

    info: PackageInfo
    package_attrs: dict
    release_attrs: dict
    file_attrs: dict

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def version(self) -> str:
        return self.info.version

    @property
    def basename(self) -> str:
        return self.info.basename


class PackageMetadataError(Exception):
    """anaconda-client's inspector could not read the package's info/ files."""


# What anaconda-client's inspector raises for a damaged package (see inspect_for_anaconda).
_INSPECT_ERRORS: tuple[type[Exception], ...] = (*READ_ERRORS, ValueError, KeyError, TypeError, AttributeError)


def inspect_for_anaconda(info: PackageInfo) -> AnacondaMeta:
    """Collect the package/release/file attributes with anaconda-client's own inspector."""
    from binstar_client.utils.config import PackageType
    from binstar_client.utils.detect import get_attrs

    try:
        package_attrs, release_attrs, file_attrs = get_attrs(PackageType.CONDA, str(info.path))
    except OSError:
        raise
    # A damaged stream, or metadata of the wrong shape: the inspector raises TypeError itself
    # for a missing index.json, and KeyError/AttributeError/ValueError for malformed JSON files.
    except _INSPECT_ERRORS as exc:
        raise PackageMetadataError(f"{type(exc).__name__}: {exc}") from exc
    return AnacondaMeta(info, dict(package_attrs), dict(release_attrs), dict(file_attrs))


@dataclass(frozen=True)
class StageTicket:
    """The stage response: where to send the file and the dist id to commit."""

    post_url: str
    form_data: dict[str, str]
    dist_id: str


class AnacondaSite:
    """One anaconda.org-compatible API site with one token; every method raises ApiError."""

    def __init__(self, site_url: str, token: Token | None, *, timeout: float | None = None) -> None:
        self.site_url = normalize_site_url(site_url)
        self.token = token
        self.timeout = API_TIMEOUT_S if timeout is None else timeout
        # The storage POST may legitimately take long; only an explicit timeout shortens it.
        self.storage_timeout = STORAGE_TIMEOUT_S if timeout is None else (timeout, timeout)
        self._api = self.fresh_api()

    def fresh_api(self) -> Any:
        """A Binstar client on a new HTTP session (new connections), with timeouts."""
        from binstar_client import Binstar

        api = Binstar(self.token.value if self.token else None, domain=self.site_url)
        adapter = _TimeoutAdapter(self.timeout)
        api.session.mount("http://", adapter)
        api.session.mount("https://", adapter)
        return api

    def renew_session(self) -> None:
        """Drop pooled connections (after a failure they may be half-closed)."""
        self._api.session.close()
        self._api = self.fresh_api()

    def _call(self, step: str, func: Callable[[], Any]) -> Any:
        try:
            return func()
        except _transport_errors() as exc:
            raise classify(exc, self.token, step) from None

    def check_server(self) -> None:
        """HEAD / (anaconda-client's check_server), with the status kept so 5xx is retried, 404 not."""

        def head() -> None:
            res = self._api.session.head(self.site_url)
            if res.status_code == 404:
                raise ApiError(
                    Failure.NOT_FOUND, "server check: no anaconda.org API at this URL (HEAD / -> 404)", 404
                )
            self._api._check_response(res)

        self._call("server check", head)

    def whoami(self) -> str:
        """The login the token belongs to (GET /user): proves the token is valid."""
        return str(self._call("token check", self._api.user).get("login", ""))

    def owner_exists(self, owner: str) -> bool:
        try:
            self._call("owner check", lambda: self._api.user(owner))
        except ApiError as err:
            if err.kind is Failure.NOT_FOUND:
                return False
            raise
        return True

    def find_dist(self, owner: str, meta: AnacondaMeta) -> dict | None:
        """The server's record of this file (with its sha256), or None when it is not there."""
        try:
            return self._call(
                "existence check",
                lambda: self._api.distribution(owner, meta.name, meta.version, meta.basename),
            )
        except ApiError as err:
            if err.kind is Failure.NOT_FOUND:
                return None
            raise

    def remove_dist(self, owner: str, meta: AnacondaMeta) -> None:
        self._call("remove", lambda: self._api.remove_dist(owner, meta.name, meta.version, meta.basename))

    def add_label(self, owner: str, meta: AnacondaMeta, label: str) -> None:
        """POST /channels/OWNER/LABEL {package, version, basename} -> 201: label a file already there.

        The call `anaconda label`/binstar_client's ChannelsMixin.add_channel makes (labels were
        called channels); it is idempotent, so a retry after a lost answer is harmless."""
        self._call(
            "add label",
            lambda: self._api.add_channel(
                label, owner, package=meta.name, version=meta.version, filename=meta.basename
            ),
        )

    def download_dist(self, owner: str, meta: AnacondaMeta, dest: Path, sha256: str) -> None:
        """Save the server's copy of a file to dest (GET /download -> 302 -> storage), sha256 checked.

        binstar_client's download(): the storage URL is fetched without the API headers."""

        def fetch() -> None:
            url = f"{self.site_url}/download/{owner}/{meta.name}/{meta.version}/{quote(meta.basename)}"
            res = self._api.session.get(url, allow_redirects=False, stream=True)
            if res.status_code == 302:
                res.close()
                res = requests.get(res.headers["location"], stream=True, timeout=self.storage_timeout)
            self._api._check_response(res, allowed=[200])
            digest = hashlib.sha256()
            tmp = dest.with_name(dest.name + ".part")
            with res, tmp.open("wb") as fh:
                for chunk in res.iter_content(1 << 20):
                    digest.update(chunk)
                    fh.write(chunk)
            if sha256 and digest.hexdigest() != sha256:
                tmp.unlink(missing_ok=True)
                raise ApiError(
                    Failure.STORAGE, "backup download: the bytes received do not match the server's sha256"
                )
            os.replace(tmp, dest)

        self._call("backup download", fetch)

    def ensure_package(self, owner: str, meta: AnacondaMeta) -> bool:
        """Create the package entry when missing; True when this call created it."""
        if self.package_exists(owner, meta):
            return False
        self.create_package(owner, meta)
        return True

    def ensure_release(self, owner: str, meta: AnacondaMeta) -> bool:
        """Create the release (version) entry when missing; True when this call created it."""
        if self.release_exists(owner, meta):
            return False
        self.create_release(owner, meta)
        return True

    # One request each, so that a caller retries each on its own.

    def package_exists(self, owner: str, meta: AnacondaMeta) -> bool:
        try:
            self._call("package lookup", lambda: self._api.package(owner, meta.name))
        except ApiError as err:
            if err.kind is Failure.NOT_FOUND:
                return False
            raise
        return True

    def create_package(self, owner: str, meta: AnacondaMeta) -> None:
        from binstar_client.utils.config import PackageType

        attrs = meta.package_attrs
        try:
            self._call(
                "package create",
                lambda: self._api.add_package(
                    owner,
                    meta.name,
                    attrs.get("summary"),
                    attrs.get("license"),
                    public=True,
                    attrs=attrs,
                    license_url=attrs.get("license_url"),
                    license_family=attrs.get("license_family"),
                    package_type=PackageType.CONDA,
                ),
            )
        except ApiError as err:
            if err.kind is not Failure.CONFLICT:  # 409: our earlier create whose answer was lost
                raise

    def release_exists(self, owner: str, meta: AnacondaMeta) -> bool:
        try:
            self._call("release lookup", lambda: self._api.release(owner, meta.name, meta.version))
        except ApiError as err:
            if err.kind is Failure.NOT_FOUND:
                return False
            raise
        return True

    def create_release(self, owner: str, meta: AnacondaMeta) -> None:
        try:
            self._call(
                "release create",
                lambda: self._api.add_release(owner, meta.name, meta.version, [], None, meta.release_attrs),
            )
        except ApiError as err:
            if err.kind is not Failure.CONFLICT:  # 409: our earlier create whose answer was lost
                raise

    def cleanup_empty(self, owner: str, meta: AnacondaMeta, *, package: bool, release: bool) -> None:
        """Remove a release/package this run created and left empty (as anaconda-client does)."""
        try:
            if release and not self._api.release(owner, meta.name, meta.version).get("distributions"):
                self._api.remove_release(owner, meta.name, meta.version)
            if package and not self._api.package(owner, meta.name).get("files"):
                self._api.remove_package(owner, meta.name)
        except _transport_errors():  # best effort: an empty release is harmless
            return

    def _path(self, verb: str, owner: str, meta: AnacondaMeta) -> str:
        return f"{self.site_url}/{verb}/{owner}/{meta.name}/{meta.version}/{quote(meta.basename)}"

    def stage(self, owner: str, meta: AnacondaMeta, sha256: str, labels: tuple[str, ...]) -> StageTicket:
        """POST /stage: announce the file and get a storage form to send it with."""
        payload = {
            "distribution_type": "conda",
            "description": None,
            "attrs": meta.file_attrs.get("attrs", {}),
            "dependencies": meta.file_attrs.get("dependencies"),
            "channels": list(labels),
            "sha256": sha256,
        }

        def post() -> dict:
            res = self._api.session.post(self._path("stage", owner, meta), json=payload)
            self._api._check_response(res)
            return res.json()

        obj = self._call("stage", post)
        try:
            return StageTicket(
                str(obj["post_url"]), {k: str(v) for k, v in obj["form_data"].items()}, obj["dist_id"]
            )
        except (KeyError, TypeError, AttributeError):
            raise ApiError(
                Failure.SERVER, "stage: the server's answer lacks post_url/form_data/dist_id"
            ) from None

    def send_file(
        self,
        ticket: StageTicket,
        path: Path,
        basename: str,
        md5_hex: str,
        size: int,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """The storage POST: one multipart form, file streamed from disk, no API headers."""
        from defusedxml import ElementTree
        from requests_toolbelt import MultipartEncoder, MultipartEncoderMonitor

        md5_b64 = base64.b64encode(bytes.fromhex(md5_hex)).decode()
        try:
            with path.open("rb") as fh:
                fields: dict[str, Any] = dict(ticket.form_data)
                fields["Content-Length"] = str(size)
                fields["Content-MD5"] = md5_b64
                fields["file"] = (basename, fh)
                encoder = MultipartEncoder(fields)
                overhead = encoder.len - size
                body: Any = encoder
                if progress is not None:
                    body = MultipartEncoderMonitor(
                        encoder, lambda mon: progress(max(0, min(size, mon.bytes_read - overhead)))
                    )
                res = requests.post(
                    ticket.post_url,
                    data=body,
                    headers={"Content-Type": encoder.content_type},
                    timeout=self.storage_timeout,
                )
        except _transport_errors() as exc:
            raise classify(exc, self.token, "file upload") from None
        if res.status_code == 201:
            return
        code = ""
        try:
            node = ElementTree.fromstring(res.text).find("Code")
            code = node.text or "" if node is not None else ""
        except (ElementTree.ParseError, ValueError):  # not XML, or XML defusedxml refuses
            code = ""
        kind = Failure.SERVER if res.status_code >= 500 else Failure.STORAGE
        what = f"storage rejected the file: {code}" if code else "storage answered without an S3 result"
        if code == "InvalidDigest":
            what += " (the Content-MD5 did not match the bytes received)"
        raise ApiError(kind, f"file upload: {what} (HTTP {res.status_code})", res.status_code)

    def commit(self, owner: str, meta: AnacondaMeta, ticket: StageTicket) -> dict:
        """POST /commit on a fresh connection: the pooled one sat idle through the whole upload."""
        api = self.fresh_api()
        try:

            def post() -> dict:
                res = api.session.post(self._path("commit", owner, meta), json={"dist_id": ticket.dist_id})
                api._check_response(res)
                return res.json()

            return self._call("commit", post)
        except ApiError as err:
            if err.kind is Failure.NOT_FOUND:  # "Invalid dist_id": the stage expired (or was committed)
                raise ApiError(Failure.STALE, str(err), err.status) from None
            raise
        finally:
            api.session.close()


def normalize_site_url(url: str) -> str:
    """Mirror anaconda-client: strip the trailing slash, add https:// when there is no scheme."""
    url = url.strip().rstrip("/")
    if not url:
        raise ValueError("empty site URL")
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("http", "https"):
        return f"{scheme.lower()}://{rest}"  # HTTP://host is http://host, not https://HTTP://host
    return "https://" + url

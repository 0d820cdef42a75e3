"""A local stand-in for anaconda.org's upload API (and conda.anaconda.org's file serving).

anaconda.org cannot be reached from tests, so this server implements the API subset that
anaconda-client 1.16 uses, following docs/reference/anaconda-upload-protocol.md: the same
paths, status codes, JSON bodies and S3-style browser-form upload (multipart, Content-MD5
checked, 201 + XML, InvalidDigest). It stores committed files, serves them back as a conda
channel (/conda/OWNER[/label/LABEL]/SUBDIR/...), records every request, and injects faults.

Standard library only; bodies are streamed to disk so memory stays flat for large uploads.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import shutil
import socket
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

_CHUNK = 1 << 20
# attrs keys anaconda-client adds that are not index.json fields
_CLIENT_ATTRS = {"operatingsystem", "machine", "target-triplet", "has_prefix"}


@dataclass
class Fault:
    """Make the next `times` requests to `step` misbehave in the way `kind` names.

    steps: root (HEAD /), user, dist, package, release, stage, s3, commit, channels (labels),
           download, any; "METHOD step" (e.g. "DELETE dist") limits a fault to one method
    kinds: 500, 503, drop (close the connection without answering; at s3 after half the body),
           409 (stage), bad_digest (s3), 402 (commit), lost_reply (do the work, then drop the
           connection instead of answering), echo_auth (500 whose body repeats the Authorization
           header, like a careless proxy), hang (answer after `hang_seconds`)
    """

    step: str
    kind: str
    times: int = 1


@dataclass
class Dist:
    owner: str
    name: str
    version: str
    basename: str
    sha256: str
    md5: str
    size: int
    labels: list[str]
    attrs: dict
    blob: Path
    dist_id: str


@dataclass
class Staged:
    owner: str
    name: str
    version: str
    basename: str
    sha256: str
    labels: list[str]
    attrs: dict
    dependencies: dict | None
    key: str
    blob: Path | None = None
    md5: str = ""
    size: int = 0


@dataclass
class Request:
    """One request as the server saw it (never the token: only whether one was sent)."""

    method: str
    path: str
    status: int
    client_port: int
    authorization: str  # "none", "valid", "invalid"
    scheme: str = ""  # "token", "Bearer", ...
    json_body: object = None
    s3_fields: list[str] = field(default_factory=list)


class FakeAnaconda:
    """The server plus its state; use as a context manager or call start()/stop()."""

    def __init__(
        self,
        root: Path,
        *,
        tokens: dict[str, str] | None = None,
        orgs: dict[str, set[str]] | None = None,
        quota_bytes: int | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.tokens = dict(tokens or {})  # token -> login
        self.orgs = {k: set(v) for k, v in (orgs or {}).items()}  # org -> member logins
        self.quota_bytes = quota_bytes
        self.hang_seconds = 2.0
        self.packages: dict[tuple[str, str], dict] = {}
        self.releases: dict[tuple[str, str, str], dict] = {}
        self.dists: dict[tuple[str, str, str, str], Dist] = {}
        self.staged: dict[str, Staged] = {}
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeAnaconda:
        handler = type("Handler", (_Handler,), {"app": self})
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> FakeAnaconda:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def channel_url(self, owner: str, label: str = "main") -> str:
        return f"{self.url}/conda/{owner}" + ("" if label == "main" else f"/label/{label}")

    # -- test helpers -----------------------------------------------------------------------

    def inject(self, step: str, kind: str, times: int = 1) -> None:
        with self.lock:
            self.faults.append(Fault(step, kind, times))

    def take_fault(self, step: str, method: str = "") -> str | None:
        """The next fault for a step ("dist"), or for one method of it ("DELETE dist")."""
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.step in (step, f"{method} {step}", "any"):
                    fault.times -= 1
                    return fault.kind
        return None

    def files(self, owner: str) -> dict[str, Dist]:
        """Committed files of an owner by basename."""
        with self.lock:
            return {d.basename: d for (o, *_), d in self.dists.items() if o == owner}

    def calls(self, step: str) -> list[Request]:
        return [r for r in self.requests if r.path.split("/")[1:2] == [step]]

    def owners(self) -> set[str]:
        return set(self.tokens.values()) | set(self.orgs)

    def may_write(self, login: str | None, owner: str) -> bool:
        return login is not None and (login == owner or login in self.orgs.get(owner, set()))

    def repodata(self, owner: str, label: str, subdir: str) -> dict:
        data: dict = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}, "repodata_version": 1}
        with self.lock:
            for dist in self.dists.values():
                sub, _, filename = dist.basename.partition("/")
                if dist.owner != owner or sub != subdir or label not in (dist.labels or ["main"]):
                    continue
                record = {k: v for k, v in dist.attrs.items() if k not in _CLIENT_ATTRS}
                record.update(
                    name=dist.name, version=dist.version, sha256=dist.sha256, md5=dist.md5, size=dist.size
                )
                key = "packages.conda" if filename.endswith(".conda") else "packages"
                data[key][filename] = record
        return data

    def dist_json(self, dist: Dist) -> dict:
        return {
            "basename": dist.basename,
            "version": dist.version,
            "sha256": dist.sha256,
            "md5": dist.md5,
            "size": dist.size,
            "labels": dist.labels,
            "attrs": dist.attrs,
            "id": dist.dist_id,
            "full_name": f"{dist.owner}/{dist.name}/{dist.version}/{dist.basename}",
            "download_url": f"//{self.url.split('//', 1)[1]}/download/{dist.owner}/{dist.name}/"
            f"{dist.version}/{dist.basename}",
        }


class _QuietServer(ThreadingHTTPServer):
    """Clients that gave up (timeouts, dropped uploads) make writes fail: expected, not noise."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return


class _Drop(Exception):
    """Close the connection without an answer."""


class _Handler(BaseHTTPRequestHandler):
    app: FakeAnaconda
    protocol_version = "HTTP/1.1"  # keep-alive, like the real service

    def log_message(self, format: str, *args: object) -> None:
        return

    # -- plumbing ---------------------------------------------------------------------------

    def _auth(self) -> tuple[str | None, str, str]:
        header = self.headers.get("Authorization")
        if not header:
            return None, "none", ""
        scheme, _, value = header.partition(" ")
        login = self.app.tokens.get(value) if scheme == "token" else None
        return login, ("valid" if login else "invalid"), scheme

    def _send(self, status: int, body: object = None, content_type: str = "application/json") -> int:
        if isinstance(body, (bytes, str)):
            raw = body.encode() if isinstance(body, str) else body
        else:
            raw = json.dumps(body if body is not None else {}).encode()
        self._record.status = status  # before the client can see the answer (no race in tests)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)
        return status

    def _base(self) -> str:
        """The URL the client used (through a proxy, the proxy's): links we hand out must use it."""
        host = self.headers.get("Host")
        return f"http://{host}" if host else self.app.url

    def _redirect(self, location: str) -> int:
        self._record.status = 302
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return 302

    def _error(self, status: int, message: str) -> int:
        return self._send(status, {"error": message})

    def _drop(self) -> None:
        self._record.status = -1
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        raise _Drop

    def _json(self) -> object:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _dispatch(self) -> None:
        path = urlsplit(self.path).path
        parts = [unquote(p) for p in path.split("/")[1:]]
        login, auth_state, scheme = self._auth()
        record = Request(self.command, path, 0, self.client_address[1], auth_state, scheme)
        # Recorded before it is answered: once a client has its reply, the request is in the log.
        self._record = record
        with self.app.lock:
            self.app.requests.append(record)
        try:
            record.status = self._route(parts, login, auth_state, record)
        except _Drop:
            record.status = -1

    do_GET = do_POST = do_DELETE = do_PATCH = do_HEAD = _dispatch

    def _fault(self, step: str) -> int | None:
        """Apply an injected fault that answers by itself; others are left for the route."""
        kind = self._pending_fault = self.app.take_fault(step, self.command)
        if kind in ("500", "503"):
            self._json_drain()
            return self._error(int(kind), "Internal Server Error")
        if kind == "echo_auth":
            self._json_drain()
            echoed = self.headers.get("Authorization")
            return self._error(500, f"upstream failure; request had Authorization: {echoed}")
        if kind == "drop":
            self._json_drain()
            self._drop()
        if kind == "hang":  # answer normally, but only after the client's timeout has passed
            time.sleep(self.app.hang_seconds)
        return None

    def _json_drain(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        while length > 0:
            length -= len(self.rfile.read(min(length, _CHUNK)))

    # -- routes -----------------------------------------------------------------------------

    def _route(self, parts: list[str], login: str | None, auth: str, record: Request) -> int:
        self._pending_fault: str | None = None
        app = self.app
        method = self.command
        head = parts[0] if parts else ""
        if method == "HEAD" and head == "":
            return self._fault("root") or self._send(200, b"", "text/html")
        if head == "conda":
            return self._serve_channel(parts[1:])
        if head == "s3" and method == "POST":
            return self._s3(record)
        if head == "blob" and method == "GET" and len(parts) == 2:
            return self._blob(parts[1])
        injected = self._fault(head)
        if injected is not None:
            return injected
        if head == "user":
            if len(parts) == 1 or parts[1] == "":
                if auth != "valid":
                    return self._error(401, "Unauthorized: a valid token is required")
                return self._send(200, {"login": login, "user_type": "user"})
            if parts[1] in app.owners():
                kind = "org" if parts[1] in app.orgs else "user"
                return self._send(200, {"login": parts[1], "user_type": kind})
            return self._error(404, f'User "{parts[1]}" does not exist')
        if auth == "invalid":
            self._json_drain()
            return self._error(401, "Unauthorized: invalid token")
        writes = method in ("POST", "PATCH", "DELETE")
        if len(parts) >= 3 and writes and not app.may_write(login, parts[1]):
            self._json_drain()
            return self._error(401, f"Unauthorized: no write access to {parts[1]}")
        if head == "dist" and len(parts) >= 6:
            return self._dist(parts)
        if head == "package" and len(parts) == 3:
            return self._package(parts)
        if head == "release" and len(parts) == 4:
            return self._release(parts)
        if head == "stage" and len(parts) >= 6 and method == "POST":
            return self._stage(parts, record)
        if head == "commit" and len(parts) >= 6 and method == "POST":
            return self._commit(parts, record)
        if head == "download" and len(parts) >= 6 and method == "GET":
            return self._download(parts)
        if head == "channels" and len(parts) == 3 and method in ("POST", "DELETE"):
            return self._label(parts, record)
        self._json_drain()
        return self._error(404, f"no route for {method} {self.path}")

    def _dist(self, parts: list[str]) -> int:
        owner, name, version, basename = parts[1], parts[2], parts[3], "/".join(parts[4:])
        key = (owner, name, version, basename)
        with self.app.lock:
            dist = self.app.dists.get(key)
            if self.command == "GET":
                if dist is None:
                    return self._error(404, f"file {basename} does not exist")
                return self._send(200, self.app.dist_json(dist))
            if self.command == "DELETE":
                if dist is None:
                    return self._error(404, f"file {basename} does not exist")
                del self.app.dists[key]
                dist.blob.unlink(missing_ok=True)
                if self._pending_fault == "lost_reply":
                    self._drop()
                return self._send(200, self.app.dist_json(dist))
        return self._error(405, "method not allowed")

    def _download(self, parts: list[str]) -> int:
        """GET /download/o/n/v/<basename> -> 302 to the storage URL (binstar_client's download())."""
        key = (parts[1], parts[2], parts[3], "/".join(parts[4:]))
        with self.app.lock:
            dist = self.app.dists.get(key)
        if dist is None:
            return self._error(404, f"file {key[3]} does not exist")
        return self._redirect(f"{self._base()}/blob/{dist.dist_id}")

    def _blob(self, dist_id: str) -> int:
        """The storage side of a download: no API headers needed (a signed URL on the real service)."""
        fault = self.app.take_fault("download")
        if fault in ("500", "503"):
            return self._send(int(fault), "<Error><Code>InternalError</Code></Error>", "application/xml")
        with self.app.lock:
            dist = next((d for d in self.app.dists.values() if d.dist_id == dist_id), None)
        if dist is None:
            return self._send(404, "<Error><Code>NoSuchKey</Code></Error>", "application/xml")
        self._record.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(dist.size))
        self.end_headers()
        with dist.blob.open("rb") as fh:
            shutil.copyfileobj(fh, self.wfile, _CHUNK)
        return 200

    def _label(self, parts: list[str], record: Request) -> int:
        """POST/DELETE /channels/OWNER/LABEL {package, version, basename} -> 201.

        binstar_client's add_channel/remove_channel (`anaconda label`): add or remove a label on
        the matching files of the owner (a null field matches everything)."""
        owner, label = parts[1], parts[2]
        body = self._json()
        record.json_body = body
        spec = body if isinstance(body, dict) else {}
        with self.app.lock:
            hits = [
                d
                for d in self.app.dists.values()
                if d.owner == owner
                and spec.get("package") in (None, d.name)
                and spec.get("version") in (None, d.version)
                and spec.get("basename") in (None, d.basename)
            ]
            if not hits:
                return self._error(404, "no file matches")
            for dist in hits:
                if self.command == "POST" and label not in dist.labels:
                    dist.labels.append(label)
                elif self.command == "DELETE" and label in dist.labels:
                    dist.labels.remove(label)
        if self._pending_fault == "lost_reply":
            self._drop()
        return self._send(201, b"", "text/plain")

    def _package(self, parts: list[str]) -> int:
        key = (parts[1], parts[2])
        body = self._json() if self.command in ("POST", "PATCH") else None
        with self.app.lock:
            files = [self.app.dist_json(d) for k, d in self.app.dists.items() if k[:2] == key]
            if self.command == "GET":
                if key not in self.app.packages:
                    return self._error(404, f"package {parts[1]}/{parts[2]} does not exist")
                return self._send(200, {**self.app.packages[key], "files": files})
            if self.command == "POST":
                if key in self.app.packages:
                    return self._error(409, "package already exists")
                self.app.packages[key] = {
                    "name": parts[2],
                    "owner": parts[1],
                    "package_types": ["conda"],
                    "body": body,
                }
                return self._send(200, self.app.packages[key])
            if self.command == "PATCH":
                return self._send(200, self.app.packages.get(key, {}))
            if self.command == "DELETE":
                self.app.packages.pop(key, None)
                return self._send(201, b"", "text/plain")
        return self._error(405, "method not allowed")

    def _release(self, parts: list[str]) -> int:
        key = (parts[1], parts[2], parts[3])
        body = self._json() if self.command in ("POST", "PATCH") else None
        with self.app.lock:
            dists = [self.app.dist_json(d) for k, d in self.app.dists.items() if k[:3] == key]
            if self.command == "GET":
                if key not in self.app.releases:
                    return self._error(404, f"release {'/'.join(key)} does not exist")
                return self._send(200, {**self.app.releases[key], "distributions": dists})
            if self.command == "POST":
                if key[:2] not in self.app.packages:
                    return self._error(404, f"package {parts[1]}/{parts[2]} does not exist")
                self.app.releases[key] = {"version": parts[3], "body": body}
                return self._send(200, self.app.releases[key])
            if self.command == "PATCH":
                return self._send(200, self.app.releases.get(key, {}))
            if self.command == "DELETE":
                self.app.releases.pop(key, None)
                return self._send(201, b"", "text/plain")
        return self._error(405, "method not allowed")

    def _stage(self, parts: list[str], record: Request) -> int:
        owner, name, version, basename = parts[1], parts[2], parts[3], "/".join(parts[4:])
        body = self._json()
        record.json_body = body
        if self._pending_fault == "409":
            return self._error(409, f"file {basename} already exists for package {name} version {version}")
        if not isinstance(body, dict) or not re.fullmatch(r"[0-9a-f]{64}", str(body.get("sha256", ""))):
            return self._error(400, "stage needs a JSON body with sha256")
        with self.app.lock:
            if (owner, name, version) not in self.app.releases:
                return self._error(404, f"release {owner}/{name}/{version} does not exist")
            if (owner, name, version, basename) in self.app.dists:
                return self._error(
                    409, f"file {basename} already exists for package {name} version {version}"
                )
            dist_id = uuid.uuid4().hex[:24]
            key = f"{owner}/{dist_id}"
            self.app.staged[dist_id] = Staged(
                owner,
                name,
                version,
                basename,
                body["sha256"],
                list(body.get("channels") or []),
                dict(body.get("attrs") or {}),
                body.get("dependencies"),
                key,
            )
        form = {
            "Content-Type": "application/octet-stream",
            "acl": "private",
            "key": key,
            "policy": base64.b64encode(b'{"expiration": "2099-01-01T00:00:00Z"}').decode(),
            "success_action_status": "201",
            "x-amz-algorithm": "AWS4-HMAC-SHA256",
            "x-amz-credential": "FAKE/20260101/us-east-1/s3/aws4_request",
            "x-amz-date": "20260101T000000Z",
            "x-amz-signature": "0" * 64,
            "x-amz-storage-class": "STANDARD",
        }
        return self._send(
            200,
            {"post_url": f"{self._base()}/s3", "form_data": form, "dist_id": dist_id, "basename": basename},
        )

    def _s3(self, record: Request) -> int:
        fault = self.app.take_fault("s3")
        if fault in ("500", "503"):
            self._json_drain()
            return self._send(int(fault), "<Error><Code>InternalError</Code></Error>", "application/xml")
        length = int(self.headers.get("Content-Length") or -1)
        if length < 0:
            return self._send(411, "<Error><Code>MissingContentLength</Code></Error>", "application/xml")
        match = re.search(r'boundary="?([^";]+)"?', self.headers.get("Content-Type", ""))
        if not match:
            self._json_drain()
            return self._send(400, "<Error><Code>MalformedPOSTRequest</Code></Error>", "application/xml")
        spool = tempfile.NamedTemporaryFile(dir=self.app.root, delete=False, prefix="upload-")  # noqa: SIM115
        try:
            left = length
            cut = length // 2 if fault == "drop" else -1
            with spool:
                while left > 0:
                    chunk = self.rfile.read(min(left, _CHUNK))
                    if not chunk:
                        break
                    spool.write(chunk)
                    left -= len(chunk)
                    if cut >= 0 and length - left >= cut:
                        self._drop()
            if left:
                self._drop()
            fields, start, end = _parse_form(Path(spool.name), match.group(1).encode(), length)
            record.s3_fields = list(fields)
            return self._store(Path(spool.name), fields, start, end, fault)
        finally:
            Path(spool.name).unlink(missing_ok=True)

    def _store(self, spool: Path, fields: dict[str, str], start: int, end: int, fault: str | None) -> int:
        xml = "application/xml"
        if start < 0 or "key" not in fields:
            return self._send(400, "<Error><Code>MalformedPOSTRequest</Code></Error>", xml)
        md5, sha = hashlib.md5(), hashlib.sha256()
        blob = self.app.root / "blobs" / fields["key"].replace("/", "_")
        blob.parent.mkdir(exist_ok=True)
        with spool.open("rb") as src, blob.open("wb") as dst:
            src.seek(start)
            left = end - start
            while left > 0:
                chunk = src.read(min(left, _CHUNK))
                md5.update(chunk)
                sha.update(chunk)
                dst.write(chunk)
                left -= len(chunk)
        size = end - start
        given_md5 = fields.get("Content-MD5", "")
        if fault == "bad_digest" or given_md5 != base64.b64encode(md5.digest()).decode():
            blob.unlink(missing_ok=True)
            return self._send(
                400,
                "<Error><Code>InvalidDigest</Code><Message>The Content-MD5 you specified was invalid."
                "</Message></Error>",
                xml,
            )
        if fields.get("Content-Length") != str(size):
            blob.unlink(missing_ok=True)
            return self._send(400, "<Error><Code>IncompleteBody</Code></Error>", xml)
        with self.app.lock:
            staged = next((s for s in self.app.staged.values() if s.key == fields["key"]), None)
            if staged is None:
                blob.unlink(missing_ok=True)
                return self._send(403, "<Error><Code>AccessDenied</Code></Error>", xml)
            staged.blob, staged.md5, staged.size = blob, md5.hexdigest(), size
            staged.attrs["_uploaded_sha256"] = sha.hexdigest()
        if fault == "lost_reply":
            self._drop()
        return self._send(201, f"<PostResponse><Key>{fields['key']}</Key></PostResponse>", xml)

    def _commit(self, parts: list[str], record: Request) -> int:
        owner, name, version, basename = parts[1], parts[2], parts[3], "/".join(parts[4:])
        body = self._json()
        record.json_body = body
        dist_id = body.get("dist_id") if isinstance(body, dict) else None
        if self._pending_fault == "402":
            return self._error(402, "Storage requirements exceeded (3221225472 bytes). Contact support.")
        with self.app.lock:
            staged = self.app.staged.get(str(dist_id))
            if staged is None or (staged.owner, staged.name, staged.version, staged.basename) != (
                owner,
                name,
                version,
                basename,
            ):
                return self._error(404, "Invalid dist_id")
            if staged.blob is None:
                return self._error(400, "file was not uploaded")
            uploaded = staged.attrs.pop("_uploaded_sha256")
            if uploaded != staged.sha256:
                return self._error(400, "sha256 of the uploaded file does not match the staged sha256")
            used = sum(d.size for d in self.app.dists.values() if d.owner == owner)
            if self.app.quota_bytes is not None and used + staged.size > self.app.quota_bytes:
                return self._error(402, f"Storage requirements exceeded ({self.app.quota_bytes} bytes)")
            key = (owner, name, version, basename)
            if key in self.app.dists:
                return self._error(409, f"file {basename} already exists")
            self.app.dists[key] = Dist(
                owner,
                name,
                version,
                basename,
                staged.sha256,
                staged.md5,
                staged.size,
                staged.labels or ["main"],
                staged.attrs,
                staged.blob,
                dist_id,
            )
            del self.app.staged[dist_id]
        if self._pending_fault == "lost_reply":
            self._drop()
        return self._send(200, {"url": f"{self.app.url}/{owner}/{name}", "dist_id": dist_id})

    def _serve_channel(self, parts: list[str]) -> int:
        if len(parts) >= 4 and parts[1] == "label":
            owner, label, rest = parts[0], parts[2], parts[3:]
        else:
            owner, label, rest = parts[0], "main", parts[1:]
        if len(rest) != 2:
            return self._error(404, "not found")
        subdir, filename = rest
        if filename == "repodata.json":
            return self._send(200, self.app.repodata(owner, label, subdir))
        with self.app.lock:
            dist = next(
                (
                    d
                    for d in self.app.dists.values()
                    if d.owner == owner and d.basename == f"{subdir}/{filename}" and label in d.labels
                ),
                None,
            )
        if dist is None:
            return self._error(404, "not found")
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(dist.size))
        self.end_headers()
        if self.command != "HEAD":
            with dist.blob.open("rb") as fh:
                shutil.copyfileobj(fh, self.wfile, _CHUNK)
        return 200


def _parse_form(spool: Path, boundary: bytes, length: int) -> tuple[dict[str, str], int, int]:
    """Parse a multipart/form-data body on disk whose last part is `file`.

    Returns the text fields (in order), and the byte range of the file part's content.
    """
    delim = b"--" + boundary
    with spool.open("rb") as fh:
        head = fh.read(min(length, 256 * 1024))
        fh.seek(max(0, length - len(delim) - 8))
        tail = fh.read()
    fields: dict[str, str] = {}
    pos = head.find(delim)
    while pos >= 0:
        pos += len(delim)
        if head[pos : pos + 2] == b"--":
            break
        header_end = head.find(b"\r\n\r\n", pos)
        if header_end < 0:
            return fields, -1, -1
        headers = head[pos:header_end].decode("utf-8", "replace")
        name_match = re.search(r'name="([^"]*)"', headers)
        name = name_match.group(1) if name_match else ""
        content_start = header_end + 4
        if name == "file":
            closing = b"\r\n" + delim + b"--\r\n"
            if not tail.endswith(closing):
                return fields, -1, -1
            return fields, content_start, length - len(closing)
        nxt = head.find(b"\r\n" + delim, content_start)
        if nxt < 0:
            return fields, -1, -1
        fields[name] = head[content_start:nxt].decode("utf-8", "replace")
        pos = nxt + 2
    return fields, -1, -1

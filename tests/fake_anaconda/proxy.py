"""A fault-injecting HTTP proxy on 127.0.0.1, put in front of the fake anaconda.org.

A real TCP proxy: the upload client connects to it as to the API site (the fake server builds
its storage and download links from the Host header, so every request, the file upload
included, goes through it). Each request is forwarded or, with probability `probability`, hit
by one fault drawn from `kinds` with a seeded random generator (the same seed gives the same
faults for the same sequence of requests):

  503          answer 503 itself; the server never sees the request
  reset_before reset the connection (RST) when the request head has arrived; not forwarded
  reset_mid    forward the head and half of the body (all of a bodyless request's head), then
               reset both sides: the server may or may not have acted
  lost_reply   forward everything, let the server act and answer, then reset instead of answering
  stall        hold the request, forwarded to nobody, for `stall_seconds` (past the client's
               timeout), then close
  late_reply   forward, let the server act, hold the answer for `stall_seconds`, then close

`script` lists faults for the first requests, in order, before the random ones start (to make
sure the start-up requests are hit). Standard library only.
"""

from __future__ import annotations

import collections
import contextlib
import json
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

KINDS = ("503", "reset_before", "reset_mid", "lost_reply", "stall", "late_reply")
_CHUNK = 1 << 16


@dataclass
class Injected:
    """One fault as the proxy applied it."""

    kind: str
    method: str
    path: str

    @property
    def step(self) -> str:
        parts = self.path.split("?")[0].split("/")
        return parts[1] or "root" if len(parts) > 1 else "root"


@dataclass
class FaultProxy:
    upstream: tuple[str, int]
    probability: float = 0.3
    seed: int = 0
    kinds: tuple[str, ...] = KINDS
    stall_seconds: float = 2.0
    script: list[str] = field(default_factory=list)
    requests: int = 0
    injected: list[Injected] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._stopped = threading.Event()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self._listener = sock
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._listener is not None
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def counts(self) -> dict[str, int]:
        """Injected faults by kind."""
        with self._lock:
            return dict(collections.Counter(i.kind for i in self.injected))

    def set_probability(self, probability: float) -> None:
        with self._lock:
            self.probability = probability

    # -- per connection -----------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _decide(self, method: str, path: str) -> str | None:
        with self._lock:
            self.requests += 1
            if self.script:
                kind: str | None = self.script.pop(0)
            elif self._rng.random() < self.probability:
                kind = self._rng.choice(self.kinds)
            else:
                kind = None
            if kind:
                self.injected.append(Injected(kind, method, path))
            return kind

    def _serve(self, client: socket.socket) -> None:
        rfile = client.makefile("rb")
        try:
            while not self._stopped.is_set():
                head = _read_head(rfile)
                if head is None:
                    return
                request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
                method, path = [*request_line.split(" "), "", ""][:2]
                length = _content_length(head)
                kind = self._decide(method, path)
                if not self._one(client, rfile, head, length, kind):
                    return
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                rfile.close()
            with contextlib.suppress(OSError):
                client.close()

    def _one(self, client: socket.socket, rfile, head: bytes, length: int, kind: str | None) -> bool:
        """Handle one request; False when the client connection is finished."""
        if kind == "503":
            _drain(rfile, length)
            body = json.dumps({"error": "Service Unavailable (injected by the fault proxy)"}).encode()
            client.sendall(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            return True
        if kind == "reset_before":
            _reset(client, rfile)
            return False
        if kind == "stall":
            self._stopped.wait(self.stall_seconds)
            return False
        upstream = socket.create_connection(self.upstream)
        try:
            upstream.sendall(_close_after(head))
            if kind == "reset_mid":
                _forward(rfile, upstream, length // 2)
                _reset(upstream)
                _reset(client, rfile)
                return False
            _forward(rfile, upstream, length)
            answer = _read_all(upstream)
        finally:
            with contextlib.suppress(OSError):
                upstream.close()
        if kind == "lost_reply":
            _reset(client, rfile)
            return False
        if kind == "late_reply":
            self._stopped.wait(self.stall_seconds)
            return False
        client.sendall(answer)
        return b"connection: close" not in answer.split(b"\r\n\r\n", 1)[0].lower()


def _read_head(rfile) -> bytes | None:
    lines = []
    while True:
        line = rfile.readline(65537)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if not lines:
                continue
            return b"".join(lines) + b"\r\n"
        lines.append(line)


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip() or 0)
    return 0


def _close_after(head: bytes) -> bytes:
    """The same request head, asking the server to close after answering (one request per upstream)."""
    lines = [line for line in head.split(b"\r\n") if line and not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


def _forward(rfile, dst: socket.socket, length: int) -> None:
    while length > 0:
        chunk = rfile.read(min(length, _CHUNK))
        if not chunk:
            raise OSError("client closed mid-body")
        dst.sendall(chunk)
        length -= len(chunk)


def _drain(rfile, length: int) -> None:
    while length > 0:
        chunk = rfile.read(min(length, _CHUNK))
        if not chunk:
            return
        length -= len(chunk)


def _read_all(sock: socket.socket) -> bytes:
    parts = []
    while True:
        chunk = sock.recv(_CHUNK)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def _reset(sock: socket.socket, rfile=None) -> None:
    """Close with RST (SO_LINGER 0): the peer sees 'connection reset', not a clean end."""
    if rfile is not None:  # the descriptor stays open while a makefile() reader exists
        with contextlib.suppress(OSError):
            rfile.close()
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def wait_until(predicate, timeout: float, interval: float = 0.005) -> bool:
    """Poll predicate until it is true or timeout seconds pass (for kill-at-a-moment tests)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()

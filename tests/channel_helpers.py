"""Real local conda channels for the tests: small packages packed by condapipe, indexed by py-rattler,
served from a folder (file://) or by an HTTP server on 127.0.0.1; and the two ways a remote
channel fails to answer (a closed port, a server that accepts and never replies)."""

from __future__ import annotations

import functools
import http.server
import json
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from condapipe.package.channel_index import index_channel
from condapipe.package.io import pack


@dataclass(frozen=True)
class Pkg:
    """One package of a test channel: its name, version, run requirements and subdir."""

    name: str
    version: str
    depends: tuple[str, ...] = ()
    subdir: str = "linux-64"
    build: str = "h0_0"


def make_channel(root: Path, packages: Sequence[Pkg]) -> Path:
    """A channel at `root` holding `packages` (each a real .conda with one file), indexed."""
    for pkg in packages:
        tree = root / ".src" / f"{pkg.name}-{pkg.version}-{pkg.build}"
        (tree / "info").mkdir(parents=True, exist_ok=True)
        payload = f"share/{pkg.name}/VERSION"
        (tree / payload).parent.mkdir(parents=True, exist_ok=True)
        (tree / payload).write_text(pkg.version + "\n")
        index = {
            "name": pkg.name,
            "version": pkg.version,
            "build": pkg.build,
            "build_number": 0,
            "depends": list(pkg.depends),
            "subdir": pkg.subdir,
            "license": "BSD-3-Clause",
        }
        if pkg.subdir == "noarch":
            index["noarch"] = "generic"
        else:
            index.update(arch="x86_64", platform="linux")
        (tree / "info" / "index.json").write_text(json.dumps(index))
        (tree / "info" / "files").write_text(payload + "\n")
        (tree / "info" / "paths.json").write_text(
            json.dumps({"paths": [{"_path": payload, "path_type": "hardlink"}], "paths_version": 1})
        )
        pack(tree, root / pkg.subdir / f"{pkg.name}-{pkg.version}-{pkg.build}.conda")
    for subdir in ("noarch", "linux-64"):
        (root / subdir).mkdir(parents=True, exist_ok=True)
    index_channel(root)
    return root


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None


@contextmanager
def http_channel(root: Path) -> Iterator[str]:
    """Serve the folder `root` on 127.0.0.1 (a real HTTP server); yields the channel URL."""
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/channel"


@contextmanager
def silent_server() -> Iterator[str]:
    """A host that accepts connections and never answers (a black hole); yields its channel URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/channel"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        sock.close()


@contextmanager
def slow_server(delay: float) -> Iterator[tuple[str, list[str]]]:
    """A host that answers every request "404 Not Found", each after `delay` seconds; yields its
    channel URL and the paths asked for (a channel's index is several requests: each one alone
    stays under a client's per-request timeout, all of them together do not)."""
    asked: list[str] = []

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            threading.Event().wait(delay)
            self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/channel", asked
    finally:
        server.shutdown()
        server.server_close()

"""Running `condapipe upload` against the fake server, and checking what the server holds."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from condapipe.cli.main import main
from fake_anaconda.server import FakeAnaconda

TOKEN = "tok-alice-5f1c9e27a8d34b6c"  # a made-up token; greppable in every output
OTHER_TOKEN = "tok-bob-0b8e4d3a9f2c7716"


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict:
        return json.loads(self.stdout)


def isolated_env(home: Path, token: str | None = TOKEN) -> dict[str, str | None]:
    """Environment for one run: own HOME/config dir, telemetry off, token only via env."""
    env: dict[str, str | None] = {
        "HOME": str(home),
        "BINSTAR_CONFIG_DIR": str(home / ".binstar"),
        "ANACONDA_TELEMETRY_ENABLED": "false",
        "BINSTAR_API_TOKEN": None,
        "ANACONDA_API_TOKEN": token,
        "NO_PROXY": "127.0.0.1",
    }
    return env


def run_cli(args: Sequence[str], env: dict[str, str | None], cwd: Path) -> Result:
    """Invoke the condapipe CLI in-process (fast) with its own cwd and environment."""
    runner = CliRunner()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        res = runner.invoke(main, list(args), env=env, catch_exceptions=False)
    finally:
        os.chdir(old)
    return Result(res.exit_code, res.stdout, res.stderr)


def upload_args(server: FakeAnaconda, owner: str, *extra: str) -> list[str]:
    return ["upload", "--channel", owner, "--site-url", server.url, "--retry-delay", "0.01", *extra]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_holds_exactly(server: FakeAnaconda, owner: str, expected: dict[str, Path]) -> None:
    """The server holds each expected basename once, with the sha256 of the given file, and nothing else."""
    held = server.files(owner)
    assert sorted(held) == sorted(expected), f"server holds {sorted(held)}"
    for basename, path in expected.items():
        dist = held[basename]
        assert dist.sha256 == sha256(path)
        assert hashlib.sha256(dist.blob.read_bytes()).hexdigest() == dist.sha256
    keys = [k for k in server.dists if k[0] == owner]
    assert len(keys) == len(set(keys)) == len(expected)

"""The fake anaconda.org is faithful: the real `anaconda upload` CLI (anaconda-client 1.16) works with it.

If the real client can upload, detect conflicts, skip, force and fail against the fake server
exactly as docs/reference/anaconda-upload-protocol.md records for anaconda.org, then the
condapipe upload tests against that server mean something.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_anaconda import FakeAnaconda, make_package
from fake_anaconda.harness import TOKEN, assert_holds_exactly

from condapipe.package.io import read_package_info

pytestmark = pytest.mark.skipif(shutil.which("anaconda") is None, reason="anaconda-client CLI not installed")


@pytest.fixture
def server(tmp_path: Path):
    with FakeAnaconda(tmp_path / "server", tokens={TOKEN: "alice"}, orgs={"myorg": {"alice"}}) as srv:
        yield srv


@pytest.fixture
def anaconda(tmp_path: Path, server: FakeAnaconda):
    """Run the real CLI: its own config dir pointed at the server, telemetry off, token via env only."""
    home = tmp_path / "home"
    home.mkdir()
    base = {
        **os.environ,
        "HOME": str(home),
        "BINSTAR_CONFIG_DIR": str(home / "binstar"),
        "ANACONDA_TELEMETRY_ENABLED": "false",
        "NO_PROXY": "127.0.0.1",
    }
    base.pop("BINSTAR_API_TOKEN", None)
    base.pop("ANACONDA_API_TOKEN", None)
    subprocess.run(
        ["anaconda", "config", "--set", "url", server.url], env=base, check=True, capture_output=True
    )

    def run(*args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess[str]:
        env = dict(base, ANACONDA_API_TOKEN=token) if token else base
        return subprocess.run(["anaconda", *args], env=env, capture_output=True, text=True, timeout=120)

    return run


@pytest.fixture
def pkgs(tmp_path: Path) -> dict[str, Path]:
    out = tmp_path / "pkgs"
    return {
        "bz2": make_package(out, "condapipe-hello", "0.1.0", fmt=".tar.bz2"),
        "conda": make_package(out, "condapipe-hello", "0.2.0", depends=["python >=3.8"]),
    }


def _held(pkgs: dict[str, Path]) -> dict[str, Path]:
    return {read_package_info(p).basename: p for p in pkgs.values()}


def test_real_cli_uploads_new_files_with_the_recorded_request_sequence(anaconda, server, pkgs):
    res = anaconda("upload", "-u", "myorg", "-l", "main", str(pkgs["bz2"]), str(pkgs["conda"]))
    assert res.returncode == 0, res.stderr
    first = [
        (r.method, r.path.split("/")[1] if r.path != "/" else "/", r.status) for r in server.requests[:10]
    ]
    assert first == [
        ("HEAD", "/", 200),
        ("GET", "user", 200),
        ("GET", "dist", 404),
        ("GET", "package", 404),
        ("POST", "package", 200),
        ("GET", "release", 404),
        ("POST", "release", 200),
        ("POST", "stage", 200),
        ("POST", "s3", 201),
        ("POST", "commit", 200),
    ]
    stage = server.calls("stage")[0].json_body
    assert stage["distribution_type"] == "conda" and stage["channels"] == ["main"]
    assert stage["attrs"]["subdir"] == "noarch"
    assert server.calls("s3")[0].authorization == "none"
    assert_holds_exactly(server, "myorg", _held(pkgs))


def test_real_cli_modes_conflict_skip_and_force(anaconda, server, pkgs, tmp_path):
    assert anaconda("upload", "-u", "myorg", str(pkgs["conda"])).returncode == 0
    again = anaconda("upload", "-u", "myorg", str(pkgs["conda"]))
    assert again.returncode == 1 and "already exists" in again.stderr
    assert anaconda("upload", "-u", "myorg", "--skip-existing", str(pkgs["conda"])).returncode == 0
    rebuilt = make_package(tmp_path / "rebuilt", "condapipe-hello", "0.2.0", payload=b"rebuilt\n")
    forced = anaconda("upload", "-u", "myorg", "--force", "-l", "main", "-l", "dev", str(rebuilt))
    assert forced.returncode == 0, forced.stderr
    assert ("DELETE", 200) in [(r.method, r.status) for r in server.requests if r.path.startswith("/dist/")]
    assert server.calls("stage")[-1].json_body["channels"] == ["main", "dev"]
    assert_holds_exactly(server, "myorg", _held({"c": rebuilt}))


def test_real_cli_errors_unknown_owner_missing_token_and_bad_digest(anaconda, server, pkgs):
    nobody = anaconda("upload", "-u", "nosuchorg", str(pkgs["conda"]))
    assert nobody.returncode == 1 and 'User "nosuchorg" does not exist' in nobody.stderr
    anonymous = anaconda("upload", "-u", "myorg", str(pkgs["conda"]), token=None)
    assert anonymous.returncode == 1
    assert (anonymous.stderr + anonymous.stdout).count("401") >= 1
    server.inject("s3", "bad_digest")
    bad = anaconda("upload", "-u", "myorg", str(pkgs["conda"]))
    assert bad.returncode == 1 and "<Code>InvalidDigest</Code>" in bad.stdout + bad.stderr
    # anaconda-client removes the release it created and left empty
    assert ("DELETE", 201) in [(r.method, r.status) for r in server.calls("release")]
    assert_holds_exactly(server, "myorg", {})

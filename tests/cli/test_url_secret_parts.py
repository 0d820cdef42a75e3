"""A secret in any part of a URL is refused, and never repeated (issue 38, items 4 and 8).

A URL reaches generated workflows, recipes, logs and messages; a password fits in its user part
(`redis://u:PASS@host`), its query (`?password=PASS`, `?aws_secret_access_key=…`, `?token=…`) or
its fragment. None of the stores, channels or sites condapipe talks to needs a query or fragment,
so every URL a user gives (--compile-cache, $CONDAPIPE_COMPILE_CACHE, --site-url, -c) is refused
when it has one: exit 2, one line naming the flag and the part, and the value nowhere in the output
or in any file written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from condapipe.publish.anaconda_api import normalize_site_url

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
SECRET = "s3cr3t-d0n0tpr1nt"
MAGMA = ["magma", "--cuda", "12.4"]


def _run(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "CONDAPIPE_COMPILE_CACHE"}
    return subprocess.run(
        [*CLI, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**base, "HOME": str(cwd / "home"), **(env or {})},
    )


def _files_with_secret(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


@pytest.mark.parametrize(
    ("argv", "part"),
    [
        (
            [
                "plan",
                *MAGMA,
                "--emit",
                "github-actions",
                "--compile-cache",
                f"redis://h:6379/0?password={SECRET}",
            ],
            "query",
        ),
        (
            [
                "plan",
                *MAGMA,
                "--emit",
                "json",
                "--compile-cache",
                f"s3://bucket/p?aws_secret_access_key={SECRET}",
            ],
            "query",
        ),
        (
            ["plan", *MAGMA, "--emit", "github-actions", "--compile-cache", f"redis://h:6379/0#{SECRET}"],
            "fragment",
        ),
        (["build", *MAGMA, "--dry-run", "--compile-cache", f"redis://h:6379/0?password={SECRET}"], "query"),
        (["build", *MAGMA, "--dry-run", "-c", f"https://example.org/chan?token={SECRET}"], "query"),
        (
            [
                "upload",
                "--channel",
                "o",
                "--site-url",
                f"http://host/?token={SECRET}",
                "--dry-run",
                "x.conda",
            ],
            "query",
        ),
        (
            ["upload", "--channel", "o", "--site-url", f"https://host/#{SECRET}", "--dry-run", "x.conda"],
            "fragment",
        ),
    ],
    ids=[
        "cache-redis-query",
        "cache-s3-query",
        "cache-fragment",
        "build-cache",
        "channel",
        "site-query",
        "site-frag",
    ],
)
def test_a_secret_in_a_url_query_or_fragment_is_refused_without_repeating_it(
    tmp_path: Path, argv: list[str], part: str
) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "x.conda").write_bytes(b"")

    done = _run(tmp_path, *argv)

    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert part in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert _files_with_secret(tmp_path) == []


@pytest.mark.parametrize(
    "site",
    [f"HTTP://host/api?key={SECRET}", f"host.example/?token={SECRET}", f"https://host/#{SECRET}"],
    ids=["upper-scheme", "no-scheme", "fragment"],
)
def test_a_secret_in_the_config_files_site_url_is_refused_without_repeating_it(
    tmp_path: Path, site: str
) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "x.conda").write_bytes(b"")
    (tmp_path / "condapipe.toml").write_text(f'[upload]\nsite_url = "{site}"\n')

    done = _run(tmp_path, "upload", "--channel", "o", "--dry-run", "x.conda")

    assert done.returncode == 2, done.stderr
    assert "upload.site_url" in done.stderr
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "value",
    [f"redis://u:{SECRET}@h:6379", f"redis://h:6379/0?password={SECRET}", f"s3://b/p#{SECRET}"],
    ids=["userinfo", "query", "fragment"],
)
def test_the_compile_cache_environment_variable_is_held_to_the_flags_rules(
    tmp_path: Path, value: str
) -> None:
    (tmp_path / "home").mkdir()

    done = _run(tmp_path, "build", *MAGMA, "--dry-run", env={"CONDAPIPE_COMPILE_CACHE": value})

    assert done.returncode == 2, done.stderr
    assert "CONDAPIPE_COMPILE_CACHE" in done.stderr
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("value", ["~", "/"])
def test_the_home_folder_or_root_is_never_the_compile_cache(tmp_path: Path, value: str) -> None:
    (tmp_path / "home").mkdir()

    done = _run(tmp_path, "build", *MAGMA, "--dry-run", "--compile-cache", value)

    assert done.returncode == 2, done.stderr
    assert "home folder or /" in done.stderr


def test_an_upper_case_scheme_is_that_scheme_not_a_host() -> None:
    assert normalize_site_url("HTTP://api.example.org/") == "http://api.example.org"
    assert normalize_site_url("Https://api.example.org") == "https://api.example.org"
    assert normalize_site_url("api.example.org") == "https://api.example.org"


@pytest.mark.parametrize(
    "value",
    [
        f"https://h/simple?token={SECRET}",
        f"redis://h:1/0#password={SECRET}",
        f"https://h/x?X-Amz-Signature={SECRET}",
    ],
    ids=["query-token", "fragment-password", "presigned"],
)
def test_an_env_value_with_a_credential_in_its_query_or_fragment_is_refused(
    tmp_path: Path, value: str
) -> None:
    (tmp_path / "home").mkdir()

    done = _run(tmp_path, "plan", *MAGMA, "--emit", "github-actions", "--env", f"INDEX_URL={value}")

    assert done.returncode == 2, done.stderr
    assert "INDEX_URL" in done.stderr and SECRET not in done.stdout + done.stderr
    assert _files_with_secret(tmp_path) == []


def test_an_env_value_with_a_plain_query_is_taken(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()

    done = _run(tmp_path, "plan", *MAGMA, "--emit", "json", "--env", "INDEX_URL=https://h/simple?page=2")

    assert done.returncode == 0, done.stderr

"""Tokens: where condapipe finds one, and that it never leaks.

The hygiene test runs the real `condapipe` process (with --debug, retries, failures, a server
that echoes the Authorization header back in an error body) and greps everything the token
could leak into: stdout, stderr, tracebacks, the JSON report, the log files, and the argv of
every subprocess the run started (recorded with a Python audit hook).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote_plus

import pytest
from fake_anaconda import FakeAnaconda, make_package
from fake_anaconda.harness import TOKEN, assert_holds_exactly

from condapipe.errors import UsageError
from condapipe.publish.tokens import REDACTED, RedactingFilter, Token, read_token_file, redact, resolve_token

SITE = "http://127.0.0.1:1"


def test_token_repr_and_str_never_show_the_value():
    token = Token(TOKEN, "$ANACONDA_API_TOKEN")
    assert TOKEN not in repr(token) and TOKEN not in str(token) and TOKEN not in f"{token!r} {token}"
    assert "$ANACONDA_API_TOKEN" in str(token)


def test_precedence_token_file_then_binstar_then_anaconda_env(tmp_path):
    tok_file = tmp_path / "tok"
    tok_file.write_text("from-file-token\n")
    tok_file.chmod(0o600)
    env = {"BINSTAR_API_TOKEN": "binstar-token", "ANACONDA_API_TOKEN": "anaconda-token"}
    assert resolve_token(SITE, tok_file, env).value == "from-file-token"
    assert resolve_token(SITE, None, env).value == "binstar-token"
    assert resolve_token(SITE, None, {"ANACONDA_API_TOKEN": "anaconda-token"}).source == "$ANACONDA_API_TOKEN"


def test_the_environments_token_is_in_no_output_of_config_show(tmp_path, monkeypatch):
    """The settings keep the environment (the upload command reads the token there); `config show`
    prints the settings, never the environment they carry."""
    from click.testing import CliRunner

    from condapipe.cli.main import main

    monkeypatch.chdir(tmp_path)
    secret = "tok-" + "5e0c2b9d7a41f386"
    env = {"ANACONDA_API_TOKEN": secret, "BINSTAR_API_TOKEN": secret}
    for args in (
        ["config", "show", "cuda-smoke"],
        ["config", "show", "cuda-smoke", "--json"],
        ["--debug", "config", "show", "magma"],
    ):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 0, result.output
        assert secret not in result.output


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_token_file_others_can_read_is_refused_with_the_fix(tmp_path, mode):
    tok_file = tmp_path / "tok"
    tok_file.write_text("secret-token-value")
    tok_file.chmod(mode)
    with pytest.raises(UsageError, match="chmod 600") as err:
        read_token_file(tok_file)
    assert "secret-token-value" not in str(err.value)


@pytest.mark.parametrize("content", ["", "   \n", "two tokens\n"])
def test_a_token_file_must_hold_one_token(tmp_path, content):
    tok_file = tmp_path / "tok"
    tok_file.write_text(content)
    tok_file.chmod(0o600)
    with pytest.raises(UsageError, match="exactly one token"):
        read_token_file(tok_file)


def test_redaction_in_text_and_log_records_including_tracebacks():
    assert redact(f"Authorization: token {TOKEN}", [Token(TOKEN, "x")]) == f"Authorization: token {REDACTED}"
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, "header %s", (f"token {TOKEN}",), None)
    try:
        raise RuntimeError(f"server said {TOKEN}")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    RedactingFilter([TOKEN]).filter(record)
    text = logging.Formatter().format(record)
    assert TOKEN not in text and REDACTED in text and "RuntimeError" in text


AUDIT_RUNNER = """
import json, os, sys
_log = open(os.environ["ARGV_LOG"], "a")
def _hook(event, args):
    if event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system"):
        _log.write(json.dumps([event, repr(args)]) + "\\n"); _log.flush()
sys.addaudithook(_hook)
from condapipe.cli.main import main
sys.argv = ["condapipe", *sys.argv[1:]]
main()
"""


def _env(home: Path, argv_log: Path, token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BINSTAR_API_TOKEN", "ANACONDA_API_TOKEN")}
    env.update(HOME=str(home), BINSTAR_CONFIG_DIR=str(home / "binstar"), ARGV_LOG=str(argv_log))
    env["ANACONDA_TELEMETRY_ENABLED"] = "false"
    if token:
        env["ANACONDA_API_TOKEN"] = token
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", AUDIT_RUNNER, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_token_never_appears_in_argv_logs_errors_debug_output_or_reports(tmp_path):
    bad_token = "tok-mallory-8d1f0c3b2a"
    home = tmp_path / "home"
    home.mkdir()
    argv_log = tmp_path / "argv.jsonl"
    out = tmp_path / "out"
    ok = make_package(out, "pytorch-mutex", "1.0", build="cpu")
    slow = make_package(out, "magma", "2.6.1", subdir="linux-64")
    broken = make_package(tmp_path / "broken", "broken", "1.0", wrong_hash=True)
    tok_file = tmp_path / "token"
    tok_file.write_text(TOKEN)
    tok_file.chmod(0o600)
    runs: list[subprocess.CompletedProcess[str]] = []
    with FakeAnaconda(tmp_path / "server", tokens={TOKEN: "alice"}, orgs={"myorg": {"alice"}}) as server:
        base = ["--debug", "upload", "--channel", "myorg", "--site-url", server.url, "--retry-delay", "0"]
        # 1: retries through a server error that echoes the Authorization header, plus a verify failure
        server.inject("stage", "echo_auth")
        server.inject("s3", "drop")
        runs.append(
            _run([*base, "--json", str(ok), str(slow), str(broken)], _env(home, argv_log, TOKEN), tmp_path)
        )
        # 2: the echo never stops: the failure detail would carry the header
        server.inject("commit", "echo_auth", times=10)
        rebuilt = make_package(tmp_path / "rebuilt", "late", "1.0")
        runs.append(_run([*base, "--retries", "2", str(rebuilt)], _env(home, argv_log, TOKEN), tmp_path))
        # 3: a rejected token, with --debug (traceback on)
        runs.append(_run([*base, "--no-verify", str(ok)], _env(home, argv_log, bad_token), tmp_path))
        # 4: token from a file, not from the environment
        runs.append(
            _run(
                [*base, "--token-file", str(tok_file), "--force", str(ok)],
                _env(home, argv_log, None),
                tmp_path,
            )
        )
        held = server.files("myorg")
    # run 3 exits non-zero with a traceback: the CLI group re-raises under --debug (exit 1, not 3)
    assert [r.returncode != 0 for r in runs] == [True, True, True, False], [r.stderr[-2000:] for r in runs]
    first = {f["basename"]: f for f in json.loads(runs[0].stdout)["files"]}
    assert first["linux-64/magma-2.6.1-0.conda"]["status"] == "uploaded"
    assert (
        first["noarch/pytorch-mutex-1.0-cpu.conda"]["attempts"] == 3
    )  # echoed header, then a dropped upload
    assert first["noarch/broken-1.0-0.conda"]["status"] == "blocked"
    assert "Traceback" in runs[2].stderr and "rejected the token" in runs[2].stderr  # --debug was on
    assert REDACTED in runs[1].stdout + runs[1].stderr  # the echoed header was scrubbed, not dropped
    assert sorted(held) == ["linux-64/magma-2.6.1-0.conda", "noarch/pytorch-mutex-1.0-cpu.conda"]

    logs = list((tmp_path / ".condapipe" / "logs").glob("*.log"))
    assert len(logs) == 4
    haystacks = {f"run{i} stdout": r.stdout for i, r in enumerate(runs)}
    haystacks |= {f"run{i} stderr": r.stderr for i, r in enumerate(runs)}
    haystacks |= {str(p): p.read_text() for p in logs}
    haystacks["argv"] = argv_log.read_text() if argv_log.exists() else ""
    haystacks["argv of the runs"] = " ".join(" ".join(map(str, r.args)) for r in runs)
    for secret in (TOKEN, bad_token):
        leaks = [name for name, text in haystacks.items() if secret in text]
        assert not leaks, f"token leaked into {leaks}"


def test_the_stored_anaconda_login_is_used_when_no_token_is_given(tmp_path):
    """`anaconda login` stores a token per site; condapipe uses it (anaconda-client's own lookup)."""
    home = tmp_path / "home"
    home.mkdir()
    pkg = make_package(tmp_path / "out", "hello", "1.0")
    with FakeAnaconda(tmp_path / "server", tokens={TOKEN: "alice"}) as server:
        env = _env(home, tmp_path / "argv.jsonl", None)
        token_dir = subprocess.run(
            [
                sys.executable,
                "-c",
                "from binstar_client.utils.config import TOKEN_DIRS; print(TOKEN_DIRS[0])",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(token_dir).mkdir(parents=True, exist_ok=True)
        (Path(token_dir) / f"{quote_plus(server.url)}.token").write_text(TOKEN)
        res = _run(["upload", "--channel", "alice", "--site-url", server.url, str(pkg)], env, tmp_path)
        assert res.returncode == 0, res.stderr
        assert_holds_exactly(server, "alice", {"noarch/hello-1.0-0.conda": pkg})

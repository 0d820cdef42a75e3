"""Upload converges on a flaky network and `--force` never loses the file.

Start-up checks are retried like any request; a lost answer is settled by looking at the server
(a lost DELETE answer of --force is still "replaced", a lost commit answer still "uploaded");
--force keeps a verified backup of the old file and puts it back when the new one cannot be
committed, also after a kill -9; labels asked for a file already there are really added. The
last test runs the real `condapipe upload` process through the fault-injecting proxy with
kill -9 cycles (a reduced bench/upload_faults.py).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fake_anaconda import FakeAnaconda, make_package
from fake_anaconda.campaign import _cmd, _env, run_campaign
from fake_anaconda.harness import TOKEN, assert_holds_exactly, isolated_env, run_cli, upload_args
from fake_anaconda.proxy import FaultProxy, wait_until

OLD = "noarch/tool-1.0-0.conda"


@pytest.fixture
def server(tmp_path: Path):
    with FakeAnaconda(tmp_path / "server", tokens={TOKEN: "alice"}, orgs={"myorg": {"alice"}}) as srv:
        yield srv


@pytest.fixture
def old(tmp_path: Path) -> Path:
    return make_package(tmp_path / "old", "tool", "1.0", payload=b"old\n")


@pytest.fixture
def new(tmp_path: Path) -> Path:
    return make_package(tmp_path / "new", "tool", "1.0", payload=b"new\n")


def _upload(server, tmp_path, *args: str):
    return run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--json"), *args], isolated_env(tmp_path), tmp_path
    )


@pytest.mark.parametrize(
    ("step", "kind"),
    [("root", "503"), ("root", "drop"), ("user", "503"), ("user", "drop"), ("user", "hang")],
)
def test_start_up_checks_are_retried_like_any_request(server, old, tmp_path, monkeypatch, step, kind):
    monkeypatch.setenv("CONDAPIPE_UPLOAD_TIMEOUT", "0.3")
    server.hang_seconds = 1.0
    server.inject(step, kind, times=2)
    res = _upload(server, tmp_path, str(old))
    assert res.exit_code == 0, res.stderr
    assert_holds_exactly(server, "myorg", {OLD: old})


def test_a_server_that_stays_down_fails_in_one_line_and_json_is_still_printed(server, old, tmp_path):
    server.inject("root", "503", times=50)
    res = _upload(server, tmp_path, "--retries", "3", str(old))
    assert res.exit_code == 3
    assert res.stderr.count("\n") <= 2 and "cannot reach" in res.stderr and "after 3 attempts" in res.stderr
    assert res.json["error"].startswith("cannot reach") and res.json["files"] == []
    assert len([r for r in server.requests if r.method == "HEAD"]) == 3


def test_a_rejected_token_is_not_retried(server, old, tmp_path):
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--retries", "5"), str(old)],
        isolated_env(tmp_path, token="tok-wrong-0000"),
        tmp_path,
    )
    assert res.exit_code == 3 and "rejected the token" in res.stderr
    assert len(server.calls("user")) == 1


def test_force_replaces_and_a_lost_delete_answer_still_reports_replaced(server, old, new, tmp_path):
    assert _upload(server, tmp_path, str(old)).exit_code == 0
    server.inject("DELETE dist", "lost_reply")
    res = _upload(server, tmp_path, "--force", str(new))
    assert res.exit_code == 0, res.stdout
    assert res.json["files"][0]["status"] == "replaced"
    assert_holds_exactly(server, "myorg", {OLD: new})
    assert not list((tmp_path / ".condapipe" / "upload" / "replace").iterdir())  # journal and backup gone


def test_a_lost_commit_answer_still_reports_uploaded(server, old, tmp_path):
    server.inject("commit", "lost_reply")
    res = _upload(server, tmp_path, str(old))
    assert res.exit_code == 0 and res.json["files"][0]["status"] == "uploaded"
    assert_holds_exactly(server, "myorg", {OLD: old})


def test_a_failed_force_puts_the_old_file_back_with_its_labels(server, old, new, tmp_path):
    assert _upload(server, tmp_path, "--label", "main", "--label", "stable", str(old)).exit_code == 0
    server.inject("commit", "402")  # not retried: the new file cannot be committed
    res = _upload(server, tmp_path, "--force", str(new))
    assert res.exit_code == 1
    (f,) = res.json["files"]
    assert f["status"] == "failed" and "the previous file was restored" in f["detail"]
    assert_holds_exactly(server, "myorg", {OLD: old})
    assert server.files("myorg")[OLD].labels == ["main", "stable"]


def test_the_old_file_is_deleted_only_after_a_verified_backup(server, old, new, tmp_path):
    assert _upload(server, tmp_path, str(old)).exit_code == 0
    server.inject("download", "503", times=50)
    res = _upload(server, tmp_path, "--retries", "3", "--force", str(new))
    assert res.exit_code == 1 and res.json["files"][0]["status"] == "failed"
    assert not [r for r in server.requests if r.method == "DELETE"]
    assert_holds_exactly(server, "myorg", {OLD: old})


def test_labels_asked_for_a_file_already_there_are_added(server, old, tmp_path):
    assert _upload(server, tmp_path, str(old)).exit_code == 0
    server.inject("channels", "lost_reply")  # the label call is idempotent: retried, applied once
    res = _upload(server, tmp_path, "--label", "main", "--label", "dev", str(old))
    assert res.exit_code == 0
    (f,) = res.json["files"]
    assert f["status"] == "already-there" and "added label(s) dev" in f["detail"]
    assert server.files("myorg")[OLD].labels == ["main", "dev"]
    assert "tool-1.0-0.conda" in server.repodata("myorg", "dev", "noarch")["packages.conda"]
    again = _upload(server, tmp_path, str(old))  # no --label: the file's labels are left alone
    assert again.json["files"][0]["detail"] == "same sha256 already on the server"
    assert server.files("myorg")[OLD].labels == ["main", "dev"]


def test_labels_that_cannot_be_added_are_reported_not_claimed(server, old, tmp_path):
    assert _upload(server, tmp_path, str(old)).exit_code == 0
    server.inject("channels", "500", times=50)
    res = _upload(server, tmp_path, "--retries", "2", "--label", "dev", str(old))
    assert res.exit_code == 1
    (f,) = res.json["files"]
    assert f["status"] == "failed" and "label(s) dev could not be added" in f["detail"]
    assert server.files("myorg")[OLD].labels == ["main"]


def _popen(server: FakeAnaconda, tmp_path: Path, files: list[Path], *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        _cmd(server.url, "myorg", files, *extra),
        env=_env(tmp_path / "home", 5.0),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _killed_after_the_delete(server, old, new, tmp_path) -> None:
    """Upload old, then kill -9 a --force of new between the DELETE and the new file's commit."""
    (tmp_path / "home").mkdir()
    assert _popen(server, tmp_path, [old]).wait(timeout=120) == 0
    server.hang_seconds = 30.0
    server.inject("stage", "hang")  # the run sits in the window where the name is empty
    proc = _popen(server, tmp_path, [new], "--force")
    assert wait_until(lambda: any(r.method == "DELETE" for r in server.requests), 60)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert OLD not in server.files("myorg")


def test_a_force_killed_after_the_delete_is_finished_by_the_rerun(server, old, new, tmp_path):
    _killed_after_the_delete(server, old, new, tmp_path)
    rerun = _popen(server, tmp_path, [new], "--force")
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert '"status": "replaced"' in out
    assert_holds_exactly(server, "myorg", {OLD: new})


def test_a_force_killed_after_the_delete_is_undone_by_the_next_run(server, old, new, tmp_path):
    _killed_after_the_delete(server, old, new, tmp_path)
    other = make_package(tmp_path / "other", "other", "1.0")
    run = _popen(server, tmp_path, [other])
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert '"status": "restored"' in out
    assert_holds_exactly(server, "myorg", {OLD: old, "noarch/other-1.0-0.conda": other})


def test_the_proxy_really_injects_what_it_says(server, old, tmp_path, monkeypatch):
    monkeypatch.setenv("CONDAPIPE_UPLOAD_TIMEOUT", "0.3")
    host, port = server.url.split("//")[1].split(":")
    script = ["503", "reset_before", "stall", "reset_mid", "lost_reply", "late_reply"]
    with FaultProxy((host, int(port)), probability=0.0, stall_seconds=0.8, script=list(script)) as proxy:
        res = run_cli(
            [
                "upload",
                "--channel",
                "myorg",
                "--site-url",
                proxy.url,
                "--retry-delay",
                "0.01",
                "--retries",
                "10",
                "--no-verify",
                str(old),
            ],
            isolated_env(tmp_path),
            tmp_path,
        )
    assert res.exit_code == 0, res.stderr
    assert [i.kind for i in proxy.injected] == script
    assert [i.step for i in proxy.injected] == ["root"] * 6  # the start-up check, through every kind
    assert_holds_exactly(server, "myorg", {OLD: old})


def test_fault_campaign_converges_in_one_run_and_survives_kill_9(tmp_path):
    """30 packages under 30 % faults (start-up, lost answers, resets mid-upload, stalls), then
    one plain and one --force kill -9 / rerun cycle: exit 0, every file exactly once."""
    result = run_campaign(tmp_path, packages=30, kill_cycles=2, timeout=0.25, log=lambda *_: None)
    assert result.ok, result.problems
    assert result.run_exit == 0 and result.statuses == {"uploaded": 30}
    kinds = set(result.faults)
    assert kinds == {"503", "reset_before", "reset_mid", "lost_reply", "stall", "late_reply"}
    steps = {key.split("@")[1] for key in result.faults_by_step}
    assert {"root", "s3", "commit"} <= steps
    assert "SIGKILL after a DELETE" in result.kills[-2] and "replaced" in result.kills[-1]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

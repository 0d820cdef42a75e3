"""`condapipe upload --channel ORG` against a faithful local anaconda.org: what a user relies on.

Every scenario ends by checking the server holds each file exactly once with the right sha256.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_anaconda import FakeAnaconda, make_package
from fake_anaconda.harness import (
    OTHER_TOKEN,
    TOKEN,
    assert_holds_exactly,
    isolated_env,
    run_cli,
    sha256,
    upload_args,
)

from condapipe.package.io import read_package_info
from condapipe.publish.anaconda_api import AnacondaSite, inspect_for_anaconda
from condapipe.publish.tokens import Token
from condapipe.publish.upload import Mode, RetryPolicy, upload_one
from condapipe.publish.upload_result import Status


@pytest.fixture
def server(tmp_path: Path):
    with FakeAnaconda(
        tmp_path / "server",
        tokens={TOKEN: "alice", OTHER_TOKEN: "bob"},
        orgs={"myorg": {"alice"}, "otherorg": {"bob"}},
    ) as srv:
        yield srv


@pytest.fixture
def pkgs(tmp_path: Path) -> dict[str, Path]:
    out = tmp_path / "out"
    return {
        "pytorch": make_package(
            out, "pytorch", "2.1.0", build="py3_0", subdir="linux-64", depends=["pytorch-mutex 1.0 cuda"]
        ),
        "magma": make_package(out, "magma-cuda121", "2.6.1", subdir="linux-64", fmt=".tar.bz2"),
        "mutex": make_package(out, "pytorch-mutex", "1.0", build="cuda"),
    }


def basenames(pkgs: dict[str, Path]) -> dict[str, Path]:
    return {read_package_info(p).basename: p for p in pkgs.values()}


def test_new_upload_publishes_every_file_in_dependency_order(server, pkgs, tmp_path):
    res = run_cli(
        [
            *upload_args(server, "myorg", "--label", "main", "--label", "dev", "--no-verify", "--json"),
            *map(str, pkgs.values()),
        ],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 0, res.stderr
    report = res.json
    assert [f["status"] for f in report["files"]] == ["uploaded"] * 3
    # mutex (metapackage) first, magma before pytorch, whatever order the files were given in
    staged = [r.path.rsplit("/", 1)[-1] for r in server.calls("stage")]
    assert staged == [
        "pytorch-mutex-1.0-cuda.conda",
        "magma-cuda121-2.6.1-0.tar.bz2",
        "pytorch-2.1.0-py3_0.conda",
    ]
    assert_holds_exactly(server, "myorg", basenames(pkgs))
    assert all(d.labels == ["main", "dev"] for d in server.files("myorg").values())
    # the stage announces the same sha256 as the bytes that arrived
    for call in server.calls("stage"):
        assert call.json_body["sha256"] in {sha256(p) for p in pkgs.values()}
        assert call.json_body["channels"] == ["main", "dev"]


def test_file_goes_to_storage_without_credentials_and_commit_uses_a_fresh_connection(server, pkgs, tmp_path):
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify"), str(pkgs["mutex"])], isolated_env(tmp_path), tmp_path
    )
    assert res.exit_code == 0, res.stderr
    (stage,) = server.calls("stage")
    (s3,) = server.calls("s3")
    (commit,) = server.calls("commit")
    assert stage.authorization == commit.authorization == "valid" and stage.scheme == "token"
    assert s3.authorization == "none"
    assert stage.json_body["channels"] == ["main"]  # no --label: main, said explicitly
    assert s3.s3_fields[-2:] == ["Content-Length", "Content-MD5"]  # form fields, then the file last
    assert commit.client_port != stage.client_port


def test_reupload_of_the_same_file_is_reported_as_already_there(server, pkgs, tmp_path):
    env = isolated_env(tmp_path)
    files = [str(p) for p in pkgs.values()]
    assert run_cli([*upload_args(server, "myorg", "--no-verify"), *files], env, tmp_path).exit_code == 0
    before = len(server.requests)
    res = run_cli([*upload_args(server, "myorg", "--no-verify", "--json"), *files], env, tmp_path)
    assert res.exit_code == 0
    assert {f["status"] for f in res.json["files"]} == {"already-there"}
    assert not [r for r in server.requests[before:] if r.method in ("POST", "DELETE")]
    assert_holds_exactly(server, "myorg", basenames(pkgs))


@pytest.fixture
def rebuilt(tmp_path: Path) -> Path:
    """Same name/version/build as pkgs['mutex'], different bytes (a rebuild)."""
    return make_package(tmp_path / "rebuilt", "pytorch-mutex", "1.0", build="cuda", payload=b"rebuilt\n")


def test_different_file_with_the_same_name_is_refused_but_the_batch_goes_on(server, pkgs, rebuilt, tmp_path):
    env = isolated_env(tmp_path)
    assert (
        run_cli([*upload_args(server, "myorg", "--no-verify"), str(pkgs["mutex"])], env, tmp_path).exit_code
        == 0
    )
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--json"), str(rebuilt), str(pkgs["magma"])],
        env,
        tmp_path,
    )
    assert res.exit_code == 1
    status = {f["basename"]: f["status"] for f in res.json["files"]}
    assert status == {
        "noarch/pytorch-mutex-1.0-cuda.conda": "refused",
        "linux-64/magma-cuda121-2.6.1-0.tar.bz2": "uploaded",
    }
    assert "--force" in res.json["files"][0]["detail"]
    assert "1 of 2 files failed" in res.stderr
    assert_holds_exactly(
        server, "myorg", {**basenames({"m": pkgs["mutex"]}), **basenames({"g": pkgs["magma"]})}
    )


def test_skip_existing_leaves_a_different_file_alone(server, pkgs, rebuilt, tmp_path):
    env = isolated_env(tmp_path)
    run_cli([*upload_args(server, "myorg", "--no-verify"), str(pkgs["mutex"])], env, tmp_path)
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--skip-existing", "--json"), str(rebuilt)],
        env,
        tmp_path,
    )
    assert res.exit_code == 0
    assert res.json["files"][0]["status"] == "skipped"
    assert_holds_exactly(server, "myorg", basenames({"m": pkgs["mutex"]}))


def test_force_replaces_a_different_file(server, pkgs, rebuilt, tmp_path):
    env = isolated_env(tmp_path)
    run_cli([*upload_args(server, "myorg", "--no-verify"), str(pkgs["mutex"])], env, tmp_path)
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--force", "--json"), str(rebuilt)], env, tmp_path
    )
    assert res.exit_code == 0, res.stdout
    assert res.json["files"][0]["status"] == "replaced"
    assert [r.method for r in server.requests if r.path.startswith("/dist/")][-1] == "DELETE"
    assert_holds_exactly(server, "myorg", basenames({"m": rebuilt}))


def test_skip_existing_and_force_together_are_a_usage_error(server, pkgs, tmp_path):
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--force", "--skip-existing"), str(pkgs["mutex"])],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0 and "exclude each other" in res.stderr


def test_bad_token_is_reported_once_and_nothing_is_written(server, pkgs, tmp_path):
    env = isolated_env(tmp_path, token="tok-not-a-real-token-123")
    res = run_cli([*upload_args(server, "myorg", "--no-verify"), str(pkgs["mutex"])], env, tmp_path)
    assert res.exit_code == 3
    assert "rejected the token from $ANACONDA_API_TOKEN" in res.stderr
    assert "tok-not-a-real-token-123" not in res.stderr + res.stdout
    assert not [r for r in server.requests if r.method in ("POST", "DELETE")]
    assert_holds_exactly(server, "myorg", {})


def test_missing_token_says_how_to_provide_one(server, pkgs, tmp_path):
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify"), str(pkgs["mutex"])],
        isolated_env(tmp_path, None),
        tmp_path,
    )
    assert res.exit_code == 3
    assert "ANACONDA_API_TOKEN" in res.stderr and "--token-file" in res.stderr


def test_unknown_owner_is_a_usage_error(server, pkgs, tmp_path):
    res = run_cli(
        [*upload_args(server, "nosuchorg", "--no-verify"), str(pkgs["mutex"])],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 2
    assert "owner 'nosuchorg' does not exist" in res.stderr
    assert not server.calls("stage")


def test_no_write_access_to_an_org_fails_each_file_without_retrying(server, pkgs, tmp_path):
    res = run_cli(
        [*upload_args(server, "otherorg", "--no-verify", "--json"), str(pkgs["mutex"]), str(pkgs["magma"])],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 1
    for f in res.json["files"]:
        assert f["status"] == "failed" and f["attempts"] == 1
        assert "not authorized to upload to 'otherorg'" in f["detail"]
    assert_holds_exactly(server, "otherorg", {})


@pytest.mark.parametrize(
    ("step", "kind", "times"),
    [
        ("stage", "500", 1),
        ("stage", "503", 2),
        ("stage", "drop", 1),
        ("stage", "409", 1),
        ("dist", "500", 1),
        ("s3", "drop", 1),
        ("s3", "500", 1),
        ("s3", "bad_digest", 1),
        ("commit", "500", 1),
        ("commit", "drop", 1),
        ("commit", "lost_reply", 1),
        ("s3", "lost_reply", 1),
    ],
)
def test_transient_faults_are_retried_until_the_file_is_there_once(server, pkgs, tmp_path, step, kind, times):
    server.inject(step, kind, times)
    files = [pkgs["mutex"], pkgs["magma"]]
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--json"), *map(str, files)],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 0, res.stdout
    first, second = res.json["files"]
    assert first["status"] == second["status"] == "uploaded"
    assert first["attempts"] == times + 1 and second["attempts"] == 1
    assert_holds_exactly(server, "myorg", basenames({"a": files[0], "b": files[1]}))


def test_quota_exceeded_is_reported_and_not_retried(server, pkgs, tmp_path):
    server.inject("commit", "402")
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--json"), str(pkgs["mutex"]), str(pkgs["magma"])],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 1
    first, second = res.json["files"]
    assert first["status"] == "failed" and first["attempts"] == 1
    assert "quota" in first["detail"] and "Storage requirements exceeded" in first["detail"]
    assert second["status"] == "uploaded"
    assert_holds_exactly(server, "myorg", basenames({"b": pkgs["magma"]}))
    # the release this run created for the failed file was cleaned up, like anaconda-client does
    assert ("myorg", "pytorch-mutex", "1.0") not in server.releases


def test_a_file_that_keeps_failing_gives_up_after_the_retry_budget(server, pkgs, tmp_path):
    server.inject("stage", "500", times=10)
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify", "--retries", "3", "--json"), str(pkgs["mutex"])],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 1
    (f,) = res.json["files"]
    assert f["status"] == "failed" and f["attempts"] == 3 and "after 3 attempts" in f["detail"]
    assert len(server.calls("stage")) == 3
    assert_holds_exactly(server, "myorg", {})


def test_backoff_doubles_between_attempts(server, pkgs):
    server.inject("commit", "503", times=3)
    waits: list[float] = []
    site = AnacondaSite(server.url, Token(TOKEN, "test"))
    meta = inspect_for_anaconda(read_package_info(pkgs["mutex"]))
    out = upload_one(
        site, "myorg", meta, (), Mode(), RetryPolicy(attempts=5, base_delay=0.5), sleep=waits.append
    )
    assert out.status is Status.UPLOADED and out.attempts == 4
    assert waits == [0.5, 1.0, 2.0]


def test_a_hung_api_call_times_out_and_is_retried(server, pkgs):
    server.hang_seconds = 1.5
    server.inject("stage", "hang")
    site = AnacondaSite(server.url, Token(TOKEN, "test"), timeout=0.3)
    meta = inspect_for_anaconda(read_package_info(pkgs["mutex"]))
    out = upload_one(site, "myorg", meta, (), Mode(), RetryPolicy(attempts=3, base_delay=0.01))
    assert out.status is Status.UPLOADED and out.attempts == 2
    assert_holds_exactly(server, "myorg", basenames({"m": pkgs["mutex"]}))


def test_dry_run_is_an_offline_preview_of_what_goes_where_in_order_with_labels(server, pkgs, tmp_path):
    """`upload --dry-run` sends no request at all and needs no token: it says which file would go
    to which URL with which labels, in upload order (the real run compares with the server)."""
    before = len(server.requests)
    res = run_cli(
        [
            *upload_args(server, "myorg", "--no-verify", "--dry-run", "--json", "--label", "dev"),
            *map(str, pkgs.values()),
        ],
        isolated_env(tmp_path, token=None),
        tmp_path,
    )
    assert res.exit_code == 0, res.stderr
    assert len(server.requests) == before
    files = res.json["files"]
    names = {read_package_info(p).basename: key for key, p in pkgs.items()}
    assert [names[f["basename"]] for f in files] == ["mutex", "magma", "pytorch"]
    assert {f["status"] for f in files} == {"would-upload"}
    assert [f["target"] for f in files] == [f"{server.url}/myorg/{f['basename']} [dev]" for f in files]
    assert res.json["dry_run"] is True
    assert_holds_exactly(server, "myorg", {})


def test_summary_table_lists_every_file(server, pkgs, tmp_path):
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify"), *map(str, pkgs.values())],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 0
    assert res.stdout.count("uploaded") == 3
    assert "log:" in res.stdout


def test_uploaded_files_install_from_the_served_channel(server, pkgs, tmp_path):
    """The server serves what it holds as a conda channel; a solver installs from it."""
    import asyncio

    import rattler

    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify"), *map(str, pkgs.values())],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 0

    async def solve_and_install() -> list[str]:
        records = await rattler.solve(
            [rattler.Channel(server.channel_url("myorg"))], ["pytorch"], platforms=["linux-64", "noarch"]
        )
        await rattler.install(
            records, target_prefix=tmp_path / "prefix", cache_dir=tmp_path / "cache", show_progress=False
        )
        return sorted(r.name.normalized for r in records)

    assert asyncio.run(solve_and_install()) == ["pytorch", "pytorch-mutex"]
    assert (tmp_path / "prefix" / "share" / "pytorch" / "pytorch-2.1.0.txt").is_file()


def test_verify_blocks_a_defective_package_unless_no_verify(server, pkgs, tmp_path):
    broken = make_package(tmp_path / "broken", "broken", "1.0", wrong_hash=True)
    env = isolated_env(tmp_path)
    res = run_cli([*upload_args(server, "myorg", "--json"), str(broken), str(pkgs["mutex"])], env, tmp_path)
    assert res.exit_code == 1
    status = {f["basename"]: (f["status"], f["detail"]) for f in res.json["files"]}
    assert status["noarch/broken-1.0-0.conda"][0] == "blocked"
    assert "verify failed" in status["noarch/broken-1.0-0.conda"][1]
    assert status["noarch/pytorch-mutex-1.0-cuda.conda"][0] == "uploaded"
    assert_holds_exactly(server, "myorg", basenames({"m": pkgs["mutex"]}))
    forced = run_cli([*upload_args(server, "myorg", "--no-verify", "--json"), str(broken)], env, tmp_path)
    assert forced.exit_code == 0 and forced.json["files"][0]["status"] == "uploaded"


class RecordingProgress:
    """A Progress that remembers what a progress bar would have shown."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, list[int]]] = []

    def start(self, basename: str, size: int):
        seen: list[int] = []
        self.events.append((basename, size, seen))
        return seen.append

    def finish(self, basename: str) -> None:
        return None


def test_progress_counts_the_file_bytes_up_to_its_size(server, tmp_path):
    big = make_package(tmp_path / "big", "big", "1.0", payload_size=3 << 20)
    progress = RecordingProgress()
    site = AnacondaSite(server.url, Token(TOKEN, "test"))
    meta = inspect_for_anaconda(read_package_info(big))
    out = upload_one(site, "myorg", meta, (), Mode(), RetryPolicy(), progress=progress)
    assert out.status is Status.UPLOADED
    ((basename, size, seen),) = progress.events
    assert basename == "noarch/big-1.0-0.conda" and size == big.stat().st_size
    assert seen == sorted(seen) and seen[-1] == size and len(seen) > 3


def test_owner_and_site_come_from_the_config_file(server, pkgs, tmp_path):
    (tmp_path / "condapipe.toml").write_text(f'[upload]\nsite_url = "{server.url}"\nchannel = "myorg"\n')
    res = run_cli(
        ["upload", "--no-verify", "--retry-delay", "0", str(pkgs["mutex"])], isolated_env(tmp_path), tmp_path
    )
    assert res.exit_code == 0, res.stderr
    assert_holds_exactly(server, "myorg", basenames({"m": pkgs["mutex"]}))


def test_site_flag_beats_the_config_file(server, pkgs, tmp_path):
    (tmp_path / "condapipe.toml").write_text('[upload]\nsite_url = "http://127.0.0.1:9"\n')
    res = run_cli(
        [*upload_args(server, "myorg", "--no-verify"), str(pkgs["mutex"])], isolated_env(tmp_path), tmp_path
    )
    assert res.exit_code == 0, res.stderr
    unreachable = run_cli(
        ["upload", "--channel", "myorg", "--no-verify", "--retry-delay", "0.01", str(pkgs["mutex"])],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert unreachable.exit_code == 3 and "cannot reach http://127.0.0.1:9" in unreachable.stderr

"""Local channels: `condapipe index DIR` and `condapipe upload --to DIR`, read by a real solver."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from pathlib import Path

import pytest
import rattler
from fake_anaconda import make_package
from fake_anaconda.harness import isolated_env, run_cli, sha256

from condapipe.package.channel_index import index_channel
from condapipe.package.io import read_package_info


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A build output folder with a small dependency chain across two subdirs and both formats."""
    d = tmp_path / "out"
    make_package(d, "pytorch-mutex", "1.0", build="cpu")
    make_package(d, "magma", "2.6.1", subdir="linux-64", fmt=".tar.bz2")
    make_package(d, "pytorch", "2.1.0", subdir="linux-64", depends=["pytorch-mutex ==1.0 cpu", "magma >=2.6"])
    return d


def _repodata(channel: Path, subdir: str) -> dict:
    return json.loads((channel / subdir / "repodata.json").read_text())


def _records(channel: Path, subdir: str) -> dict[str, dict]:
    data = _repodata(channel, subdir)
    return {**data.get("packages", {}), **data.get("packages.conda", {})}


def _install(channel_url: str, spec: str, prefix: Path, cache: Path) -> list[str]:
    async def go() -> list[str]:
        records = await rattler.solve(
            [rattler.Channel(channel_url)], [spec], platforms=["linux-64", "noarch"]
        )
        await rattler.install(records, target_prefix=prefix, cache_dir=cache, show_progress=False)
        return sorted(r.name.normalized for r in records)

    return asyncio.run(go())


def test_upload_to_a_directory_makes_a_channel_a_solver_installs_from(out, tmp_path):
    channel = tmp_path / "channel"
    res = run_cli(
        ["upload", "--to", str(channel), "--no-verify", "--output-dir", str(out)],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 0, res.stderr
    assert sorted(_records(channel, "linux-64")) == ["magma-2.6.1-0.tar.bz2", "pytorch-2.1.0-0.conda"]
    assert sorted(_records(channel, "noarch")) == ["pytorch-mutex-1.0-cpu.conda"]
    for subdir in ("linux-64", "noarch"):
        for filename, record in _records(channel, subdir).items():
            assert record["sha256"] == sha256(channel / subdir / filename)
    installed = _install(channel.as_uri(), "pytorch", tmp_path / "prefix", tmp_path / "cache")
    assert installed == ["magma", "pytorch", "pytorch-mutex"]
    assert (tmp_path / "prefix" / "share" / "magma" / "magma-2.6.1.txt").is_file()


def test_file_url_target_and_repeat_upload_is_idempotent(out, tmp_path):
    channel = tmp_path / "ch"
    env = isolated_env(tmp_path)
    args = ["upload", "--to", channel.as_uri(), "--no-verify", "--json", "--output-dir", str(out)]
    first = run_cli(args, env, tmp_path)
    assert first.exit_code == 0
    assert {f["status"] for f in first.json["files"]} == {"uploaded"}
    second = run_cli(args, env, tmp_path)
    assert second.exit_code == 0
    assert {f["status"] for f in second.json["files"]} == {"already-there"}
    assert second.json["index"]["subdirs"] == {"linux-64": 2, "noarch": 1}


def test_a_different_file_is_refused_then_replaced_with_force_and_repodata_follows(out, tmp_path):
    channel = tmp_path / "ch"
    env = isolated_env(tmp_path)
    assert (
        run_cli(
            ["upload", "--to", str(channel), "--no-verify", "--output-dir", str(out)], env, tmp_path
        ).exit_code
        == 0
    )
    rebuilt = make_package(
        tmp_path / "rebuilt", "pytorch", "2.1.0", subdir="linux-64", payload=b"rebuilt bytes\n"
    )
    refused = run_cli(["upload", "--to", str(channel), "--no-verify", "--json", str(rebuilt)], env, tmp_path)
    assert refused.exit_code == 1
    assert refused.json["files"][0]["status"] == "refused"
    assert _records(channel, "linux-64")["pytorch-2.1.0-0.conda"]["sha256"] != sha256(rebuilt)
    skipped = run_cli(
        ["upload", "--to", str(channel), "--no-verify", "--skip-existing", "--json", str(rebuilt)],
        env,
        tmp_path,
    )
    assert skipped.exit_code == 0 and skipped.json["files"][0]["status"] == "skipped"
    forced = run_cli(
        ["upload", "--to", str(channel), "--no-verify", "--force", "--json", str(rebuilt)], env, tmp_path
    )
    assert forced.exit_code == 0 and forced.json["files"][0]["status"] == "replaced"
    assert sha256(channel / "linux-64" / "pytorch-2.1.0-0.conda") == sha256(rebuilt)
    assert _records(channel, "linux-64")["pytorch-2.1.0-0.conda"]["sha256"] == sha256(rebuilt)


def test_index_command_indexes_every_subdir(out, tmp_path):
    channel = tmp_path / "ch"
    for pkg in out.iterdir():
        info = read_package_info(pkg)
        (channel / info.subdir).mkdir(parents=True, exist_ok=True)
        (channel / info.subdir / pkg.name).write_bytes(pkg.read_bytes())
    res = run_cli(["index", str(channel), "--json"], isolated_env(tmp_path), tmp_path)
    assert res.exit_code == 0, res.stderr
    assert res.json["subdirs"] == {"linux-64": 2, "noarch": 1}
    assert _records(channel, "noarch")["pytorch-mutex-1.0-cpu.conda"]["depends"] == []
    assert _records(channel, "linux-64")["pytorch-2.1.0-0.conda"]["depends"] == [
        "pytorch-mutex ==1.0 cpu",
        "magma >=2.6",
    ]
    assert not (channel / ".tmp").exists()


def test_index_notices_a_package_replaced_in_place(out, tmp_path):
    channel = tmp_path / "ch"
    (channel / "noarch").mkdir(parents=True)
    target = channel / "noarch" / "pytorch-mutex-1.0-cpu.conda"
    target.write_bytes((out / "pytorch-mutex-1.0-cpu.conda").read_bytes())
    index_channel(channel)
    other = make_package(
        tmp_path / "x", "pytorch-mutex", "1.0", build="cpu", payload=b"another build, longer\n"
    )
    target.write_bytes(other.read_bytes())
    result = index_channel(channel)
    assert result.full
    assert _records(channel, "noarch")[target.name]["sha256"] == sha256(other)


def test_index_notices_a_same_size_rebuild_replaced_in_place(tmp_path):
    first = make_package(tmp_path / "a", "same", "1.0", payload_size=1000)
    for attempt in range(500):  # random payloads: find a rebuild whose file has exactly the same size
        second = make_package(tmp_path / f"b{attempt}", "same", "1.0", payload_size=1000)
        if second.stat().st_size == first.stat().st_size:
            break
    assert first.stat().st_size == second.stat().st_size and sha256(first) != sha256(second)
    channel = tmp_path / "ch"
    (channel / "noarch").mkdir(parents=True)
    target = channel / "noarch" / first.name
    target.write_bytes(first.read_bytes())
    index_channel(channel)
    target.write_bytes(second.read_bytes())
    assert index_channel(channel).full
    assert _records(channel, "noarch")[target.name]["sha256"] == sha256(second)
    assert not index_channel(channel).full  # nothing changed since: incremental again


def test_dry_run_writes_nothing(out, tmp_path):
    channel = tmp_path / "ch"
    res = run_cli(
        ["upload", "--to", str(channel), "--no-verify", "--dry-run", "--json", "--output-dir", str(out)],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 0
    assert {f["status"] for f in res.json["files"]} == {"would-upload"}
    assert not channel.exists()
    assert not (tmp_path / ".condapipe").exists()


def test_readers_never_see_a_partial_package_or_repodata(tmp_path):
    """A reader polling the channel while packages are published sees whole files or nothing."""
    channel = tmp_path / "ch"
    versions = [make_package(tmp_path / f"v{i}", "big", "1.0", payload_size=2 << 20) for i in range(3)]
    valid = {sha256(p) for p in versions}
    stop = threading.Event()
    problems: list[str] = []
    seen = {"pkg": 0, "repodata": 0}

    def reader() -> None:
        pkg = channel / "noarch" / "big-1.0-0.conda"
        repodata = channel / "noarch" / "repodata.json"
        while not stop.is_set():
            if pkg.exists():
                digest = hashlib.sha256(pkg.read_bytes()).hexdigest()
                seen["pkg"] += 1
                if digest not in valid:
                    problems.append("partial package")
            if repodata.exists():
                try:
                    json.loads(repodata.read_text())
                    seen["repodata"] += 1
                except ValueError:
                    problems.append("partial repodata")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        from condapipe.publish.upload import Mode, upload_to_directory

        for _ in range(2):
            for version in versions:
                outcomes, _ = upload_to_directory(
                    [read_package_info(version)], str(channel), mode=Mode(force=True)
                )
                assert outcomes[0].status.ok
    finally:
        stop.set()
        thread.join()
    assert not problems
    assert seen["pkg"] > 0 and seen["repodata"] > 0
    assert not [p for p in (channel / "noarch").iterdir() if p.name.endswith(".part")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["upload", "--no-verify"], "exactly one destination"),
        (["upload", "--to", "d", "--channel", "org", "--no-verify"], "exactly one destination"),
        (["upload", "--to", "d", "--label", "dev", "--no-verify"], "apply to --channel uploads only"),
        (
            ["upload", "--to", "https://example.org/ch", "--no-verify", "PKG"],
            "expected a directory or a file:// URL",
        ),
        (["upload", "--to", "d", "--no-verify", "NOTAPKG"], "not a conda package"),
        (
            ["upload", "--to", "d", "--no-verify", "--output-dir", "empty"],
            "nothing to upload: no .conda or .tar.bz2",
        ),
        (["index", "nosuchdir"], "no such directory"),
    ],
)
def test_bad_input_is_a_one_line_usage_error(out, tmp_path, args, message):
    (tmp_path / "NOTAPKG").write_text("hello")
    (tmp_path / "empty").mkdir()
    args = [str(next(out.glob("*.conda"))) if a == "PKG" else a for a in args]
    res = run_cli(args, isolated_env(tmp_path), tmp_path)
    assert res.exit_code == 2, res.stdout + res.stderr
    assert message in res.stderr
    assert res.stderr.strip().count("\n") == 0 and "Traceback" not in res.stderr


def test_a_corrupt_package_is_a_clear_error(tmp_path):
    bad = tmp_path / "broken-1.0-0.conda"
    bad.write_bytes(b"PK\x03\x04 this is not a zip")
    res = run_cli(
        ["upload", "--to", str(tmp_path / "ch"), "--no-verify", str(bad)], isolated_env(tmp_path), tmp_path
    )
    assert res.exit_code == 2
    assert "not a readable conda package" in res.stderr and "Traceback" not in res.stderr


def test_verify_keeps_a_defective_package_out_of_the_channel(out, tmp_path):
    broken = make_package(tmp_path / "broken", "broken", "1.0", wrong_hash=True)
    channel = tmp_path / "ch"
    res = run_cli(
        ["upload", "--to", str(channel), "--json", str(broken), str(out / "pytorch-mutex-1.0-cpu.conda")],
        isolated_env(tmp_path),
        tmp_path,
    )
    assert res.exit_code == 1
    status = {f["basename"]: f["status"] for f in res.json["files"]}
    assert status == {
        "noarch/broken-1.0-0.conda": "blocked",
        "noarch/pytorch-mutex-1.0-cpu.conda": "uploaded",
    }
    assert sorted(_records(channel, "noarch")) == ["pytorch-mutex-1.0-cpu.conda"]


def test_two_publishers_at_once_both_end_up_in_the_repodata(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from condapipe.publish.upload import upload_to_directory

    channel = tmp_path / "ch"
    batches = [[make_package(tmp_path / f"p{i}", f"pkg{i}-{j}", "1.0") for j in range(3)] for i in range(2)]

    def publish(batch: list[Path]) -> bool:
        outcomes, _ = upload_to_directory([read_package_info(p) for p in batch], str(channel))
        return all(o.status.ok for o in outcomes)

    with ThreadPoolExecutor(2) as pool:
        assert all(pool.map(publish, batches))
    assert sorted(_records(channel, "noarch")) == sorted(p.name for batch in batches for p in batch)


def test_publish_packages_takes_paths_and_reports_each_file(out, tmp_path):
    from condapipe.publish.local_channel import publish_packages

    outcomes, index = publish_packages(tmp_path / "ch", sorted(out.iterdir()))
    assert [o.status.value for o in outcomes] == ["uploaded"] * 3
    assert index is not None and index.subdirs == {"linux-64": 2, "noarch": 1}

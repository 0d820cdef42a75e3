"""Several machines publishing into one channel directory on a shared filesystem never corrupt it:
the channel lock serialises the copies and the index, so after six publishers ran at once, each
with packages of its own and some that all of them publish, the repodata lists every package
exactly once and every file is complete (its sha256 is the one published and the one indexed).

Each publisher is a separate Python process (as on separate machines), started together.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from pathlib import Path

from conda_package_handling import api as cph

from condapipe.publish.local_channel import publish_packages
from condapipe.publish.upload_result import Status

PUBLISHERS = 6
OWN = 3  # packages only one publisher has
SHARED = 2  # packages every publisher publishes (the same bytes: a prerequisite built once)


def _package(out: Path, name: str, payload: bytes) -> Path:
    """A small real .conda package `name` carrying `payload`."""
    pkg = out.parent / f"src-{name}"
    (pkg / "info").mkdir(parents=True)
    (pkg / "share").mkdir()
    (pkg / "share" / f"{name}.bin").write_bytes(payload)
    index = {"name": name, "version": "1.0", "build": "h0_0", "build_number": 0, "depends": []}
    index |= {"subdir": "linux-64", "platform": "linux", "arch": "x86_64", "license": "BSD-3-Clause"}
    (pkg / "info" / "index.json").write_text(json.dumps(index))
    paths = {"paths": [{"_path": f"share/{name}.bin", "path_type": "hardlink"}], "paths_version": 1}
    (pkg / "info" / "paths.json").write_text(json.dumps(paths))
    files = ["info/index.json", "info/paths.json", f"share/{name}.bin"]
    out.mkdir(parents=True, exist_ok=True)
    cph.create(str(pkg), files, f"{name}-1.0-h0_0.conda", out_folder=str(out))
    return out / f"{name}-1.0-h0_0.conda"


def _publish(channel: str, packages: list[str], barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait(timeout=60)  # all publishers start at the same moment
    outcomes, _ = publish_packages(Path(channel), [Path(p) for p in packages])
    bad = [
        f"{o.basename}: {o.status} {o.detail}"
        for o in outcomes
        if o.status not in (Status.UPLOADED, Status.EXISTS)
    ]
    if bad:
        raise SystemExit("; ".join(bad))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_six_publishers_at_once_leave_every_package_listed_once_and_whole(tmp_path: Path) -> None:
    shared = [
        _package(tmp_path / "shared", f"shared-{i}", b"s" * 200_000 + bytes([i])) for i in range(SHARED)
    ]
    jobs: list[list[str]] = []
    for n in range(PUBLISHERS):
        own = [_package(tmp_path / f"m{n}", f"pkg-{n}-{i}", bytes([n, i]) * 150_000) for i in range(OWN)]
        jobs.append([str(p) for p in (*own, *shared)])
    expected = {Path(p).name: _sha256(Path(p)) for job in jobs for p in job}
    channel = tmp_path / "channel"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PUBLISHERS)
    procs = [ctx.Process(target=_publish, args=(str(channel), job, barrier)) for job in jobs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=300)
    assert [proc.exitcode for proc in procs] == [0] * PUBLISHERS

    repodata = json.loads((channel / "linux-64" / "repodata.json").read_text())
    listed = list(repodata.get("packages.conda", {}))
    assert sorted(listed) == sorted(expected)  # every package, exactly once (dict keys + count)
    assert len(listed) == PUBLISHERS * OWN + SHARED
    for name, sha in expected.items():
        assert _sha256(channel / "linux-64" / name) == sha, name  # the file is whole
        assert repodata["packages.conda"][name]["sha256"] == sha, name  # and indexed as such
    leftovers = [p.name for p in (channel / "linux-64").iterdir() if p.name.startswith(".")]
    assert not leftovers  # no temporary copy left behind

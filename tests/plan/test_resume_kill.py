"""Resume: `kill -9` of `condapipe build cuda-smoke` at several points, then a rerun completes.

The real CLI builds the real cuda-smoke package (nvcc 13.0, rattler-build) in a child process.
The CONDAPIPE_TEST_PAUSE hook stops it at a named point so that the kill lands exactly there;
one kill lands in the middle of the engine's build, when its log has started. After every kill
the output channel must hold only complete, verified packages that its repodata describes
correctly, and the next run must redo only what had not finished.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from plan_helpers import (
    SMOKE,
    SMOKE_LABEL,
    channel_problems,
    kill9,
    report,
    run,
    run_and_kill_at,
    start,
    statuses,
    wait_until,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA 13.0) on PATH"),
]

L = SMOKE_LABEL


def _engine_log_started(work: Path) -> bool:
    logs = list((work / "logs").glob("cuda-smoke-*-rattler-build-*.log")) if (work / "logs").exists() else []
    return any(log.stat().st_size > 0 for log in logs)


@pytest.fixture(scope="module")
def killed_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Kill one project's build at five points in turn, then let a last run finish.

    Records, after each kill, the channel's problems and the statuses of the run that followed.
    """
    project = tmp_path_factory.mktemp("resume")
    work, channel = project / ".condapipe", project / "channel"
    seen: dict[str, object] = {}

    # 1. In the middle of the engine's build (rattler-build running in-process).
    proc = start(SMOKE, project)
    wait_until(lambda: _engine_log_started(work), proc)
    kill9(proc)
    seen["mid-build"] = channel_problems(channel)
    seen["mid-build:state"] = (work / "state.json").read_text() if (work / "state.json").exists() else ""

    # 2.-5. At named points: the run that reaches a point also shows what it redid.
    points = [
        f"after:build:{L}",  # package built, not yet recorded as built
        f"before:publish:{L}",  # fixed, verified, tested; channel untouched
        f"publish:copied:publish:{L}",  # renamed into the channel, not yet indexed
        f"after:publish:{L}",  # indexed, not yet recorded as published
    ]
    for point in points:
        run_and_kill_at(point, SMOKE, project)
        seen[point] = channel_problems(channel)
        seen[f"{point}:state"] = (work / "state.json").read_text()

    # What a kill in the middle of copying into the channel leaves: a hidden, partial temp file.
    (pkg,) = (work / "steps").glob(f"fix_{L}/linux-64/*.conda")
    partial = channel / "linux-64" / f".{pkg.name}.k1ll3d.part"
    partial.write_bytes(pkg.read_bytes()[: pkg.stat().st_size // 2])
    seen["partial"] = partial

    final = run(SMOKE, project)
    seen["final"] = final
    seen["final:statuses"] = statuses(work)
    seen["project"] = project
    return seen


def test_no_kill_leaves_a_partial_or_unverified_package_in_the_channel(killed_runs: dict) -> None:
    for point in ("mid-build", f"after:build:{L}", f"before:publish:{L}"):
        assert killed_runs[point] == [], point
    for point in (f"publish:copied:publish:{L}", f"after:publish:{L}"):
        assert killed_runs[point] == [], point


def test_a_kill_in_the_middle_of_the_build_records_nothing_as_built(killed_runs: dict) -> None:
    assert f"build:{L}" not in str(killed_runs["mid-build:state"])


def test_steps_finished_before_a_kill_are_not_redone(killed_runs: dict) -> None:
    # The run killed before publish had fix/verify/test recorded, and the next run (killed after
    # the copy into the channel) started from there.
    state = str(killed_runs[f"publish:copied:publish:{L}:state"])
    for step in ("render", "build", "fix", "verify", "test"):
        assert f'"{step}:{L}"' in state
    assert f'"publish:{L}"' not in state


def test_the_rerun_after_the_last_kill_completes_the_plan(killed_runs: dict) -> None:
    final = killed_runs["final"]
    assert final.returncode == 0, final.stderr[-3000:]
    st = killed_runs["final:statuses"]
    assert st[f"publish:{L}"] == "ran"  # the copy from the killed run was never recorded
    assert {st[f"{k}:{L}"] for k in ("render", "build", "fix", "verify", "test")} == {"unchanged"}
    project = killed_runs["project"]
    (pkg,) = report(project / ".condapipe")["packages"]
    assert Path(pkg).parent == project / "channel" / "linux-64"
    assert channel_problems(project / "channel") == []
    assert not killed_runs["partial"].exists()  # the next publish removed the leftover temp file


def test_an_unchanged_rerun_does_nothing_in_under_a_second(killed_runs: dict) -> None:
    project = killed_runs["project"]
    work = project / ".condapipe"
    (pkg,) = map(Path, report(work)["packages"])
    before = pkg.stat().st_mtime_ns
    again = run(SMOKE, project)
    assert again.returncode == 0, again.stderr[-2000:]
    assert set(statuses(work).values()) == {"unchanged"}
    assert report(work)["seconds"] < 1.0
    assert pkg.stat().st_mtime_ns == before  # the channel was not touched

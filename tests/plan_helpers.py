"""Helpers for the plan, resume and report tests: run the real CLI as a process, stop it at a
named point (the CONDAPIPE_TEST_PAUSE hook), kill -9 it, and check what the channel holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from condapipe.errors import UsageError
from condapipe.package.io import read_package_info
from condapipe.verify.verifier import verify_package

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
SMOKE = ["build", "cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--engine", "rattler-build"]
SMOKE_LABEL = "cuda-smoke-1.0.0-cuda13.0"
_OUTPUT: dict[int, tuple] = {}


def start(args: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    """`condapipe ARGS` as a child process in its own process group (so kill -9 takes it all).

    Output goes to files, not pipes: a child blocked on a full pipe would never reach its pause point.
    """
    # The files outlive this function: the child writes to them until it ends.
    out = tempfile.TemporaryFile("w+")  # noqa: SIM115
    err = tempfile.TemporaryFile("w+")  # noqa: SIM115
    proc = subprocess.Popen(
        [*CLI, *args],
        cwd=cwd,
        env={**os.environ, **env},
        stdout=out,
        stderr=err,
        text=True,
        start_new_session=True,
    )
    _OUTPUT[proc.pid] = (out, err)
    return proc


def output(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Everything the process wrote (stdout, stderr) so far."""
    files = _OUTPUT[proc.pid]
    texts = []
    for fh in files:
        fh.seek(0)
        texts.append(fh.read())
    return texts[0], texts[1]


def run(args: list[str], cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    proc = start(args, cwd, **env)
    proc.wait(timeout=timeout)
    out, err = output(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            err = output(proc)[1]
            raise AssertionError(f"process ended ({proc.returncode}) before the kill point:\n{err[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the kill point")
        time.sleep(0.05)


def kill9(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def run_and_kill_at(point: str, args: list[str], cwd: Path) -> None:
    """Run until the process reaches pause point `point`, then kill -9 it there."""
    marker = cwd / f"paused-{os.getpid()}.txt"
    marker.unlink(missing_ok=True)
    proc = start(args, cwd, CONDAPIPE_TEST_PAUSE=point, CONDAPIPE_TEST_PAUSE_FILE=str(marker))
    wait_until(lambda: marker.exists() and point in marker.read_text(), proc)
    kill9(proc)
    marker.unlink()


def channel_problems(channel: Path) -> list[str]:
    """Why `channel` is not "only complete, verified packages, all of them indexed correctly"."""
    problems: list[str] = []
    if not channel.exists():
        return problems
    for subdir in sorted(p for p in channel.iterdir() if p.is_dir() and not p.name.startswith(".")):
        packages = [p for p in subdir.iterdir() if p.name.endswith((".conda", ".tar.bz2"))]
        for pkg in packages:
            if pkg.name.startswith("."):
                problems.append(f"temporary file left visible: {pkg}")
                continue
            try:
                read_package_info(pkg)
            except UsageError as exc:
                problems.append(f"{pkg.name}: unreadable ({exc})")
                continue
            report = verify_package(pkg)
            if not report.ok:
                problems.append(f"{pkg.name}: does not verify: {report.errors[:2]}")
        repodata = subdir / "repodata.json"
        if repodata.exists():
            data = json.loads(repodata.read_text())
            for key in ("packages", "packages.conda"):
                for name, record in (data.get(key) or {}).items():
                    path = subdir / name
                    if not path.exists():
                        problems.append(f"repodata lists missing {name}")
                    elif hashlib.sha256(path.read_bytes()).hexdigest() != record["sha256"]:
                        problems.append(f"repodata sha256 of {name} does not match the file")
    return problems


def report(work: Path) -> dict:
    return json.loads((work / "report.json").read_text())


def statuses(work: Path) -> dict[str, str]:
    """step id -> status of the last run, from its report.json."""
    return {s["id"]: s["status"] for s in report(work)["steps"]}

"""Files named by environment variables, and tools that hang (issue 38, items 5 and 8).

$CONDAPIPE_MEMINFO and $CONDAPIPE_DRIVER_VERSION_FILE name files doctor and `build --dry-run` read
machine facts from. A device (/dev/zero, /dev/urandom) or a FIFO there is refused with one line
naming the variable; a huge regular file is read only as far as such a file can be long. A tool
doctor asks (nvidia-smi, often a wrapper script) that hangs is stopped with everything it started.

Each command runs in a child process under a 2 GiB address-space limit, so a reader without a
bound fails the test (MemoryError) instead of exhausting the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
MAGMA = ["magma", "--cuda", "12.4"]


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _run(
    cwd: Path, argv: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
        preexec_fn=_limited,
    )


@pytest.mark.parametrize("variable", ["CONDAPIPE_DRIVER_VERSION_FILE", "CONDAPIPE_MEMINFO"])
@pytest.mark.parametrize("special", ["/dev/zero", "/dev/urandom", "fifo"])
@pytest.mark.parametrize("command", [["doctor", *MAGMA], ["build", *MAGMA, "--dry-run", "--work-dir", "w"]])
def test_a_device_or_fifo_named_by_an_environment_variable_is_refused_in_one_line(
    tmp_path: Path, variable: str, special: str, command: list[str]
) -> None:
    if special == "fifo":
        os.mkfifo(tmp_path / "fifo")
        special = str(tmp_path / "fifo")

    done = _run(tmp_path, command, {variable: special})

    assert done.returncode == 2, done.stderr[-2000:]
    assert variable in done.stderr and "not a regular file" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_a_huge_meminfo_file_is_read_only_as_far_as_meminfo_goes(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    with meminfo.open("wb") as fh:
        fh.write(b"MemTotal:       67108864 kB\nMemAvailable:   33554432 kB\n")
        fh.truncate(4 << 30)  # sparse: 4 GiB that a whole read would put in memory

    done = _run(tmp_path, ["doctor", *MAGMA, "--json"], {"CONDAPIPE_MEMINFO": str(meminfo)})

    assert done.returncode in (0, 3), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert '"ram"' in done.stdout


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_hanging_nvidia_smi_wrapper_is_stopped_with_its_children(tmp_path: Path) -> None:
    """doctor gives a tool 30 s; a wrapper whose child hangs leaves nothing running after that."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pid_file = tmp_path / "child.pid"
    (bindir / "nvidia-smi").write_text(f'#!/bin/sh\nsleep 900 &\necho $! > "{pid_file}"\nwait\n')
    (bindir / "nvidia-smi").chmod(0o755)
    env = {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "CONDAPIPE_DRIVER_VERSION_FILE": str(tmp_path / "no-driver-file"),
    }

    started = time.monotonic()
    done = _run(tmp_path, ["doctor", *MAGMA], env, timeout=300)

    assert done.returncode in (0, 3), done.stderr[-2000:]
    assert time.monotonic() - started < 240
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, 9)
    assert not alive, "the wrapper's child outlived doctor's timeout"

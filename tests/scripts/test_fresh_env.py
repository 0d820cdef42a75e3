"""scripts/fresh_env.py makes the environment a user's `conda create -c CHANNEL SPEC` would: the device
runs check every built package from one. Specs are read as conda reads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.channel_helpers import Pkg, make_channel

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fresh_env.py"


def _fresh_env(prefix: Path, channel: Path, *specs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(prefix), "--channel", str(channel), *specs],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_name_and_bare_version_installs_that_version_as_conda_reads_it(tmp_path: Path) -> None:
    channel = make_channel(
        tmp_path / "ch",
        [
            Pkg("torchvision", "0.21.0", ("pytorch ==2.6.0",)),
            Pkg("torchvision", "0.22.0"),
            Pkg("pytorch", "2.6.0"),
        ],
    )
    done = _fresh_env(tmp_path / "env", channel, "torchvision 0.21.0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pytorch=2.6.0=h0_0", "torchvision=0.21.0=h0_0"]
    assert (tmp_path / "env" / "share" / "torchvision" / "VERSION").read_text() == "0.21.0\n"


def test_an_exact_pin_with_a_dotted_build_string_solves(tmp_path: Path) -> None:
    build = "py3.12_cuda13.0_cudnn9.19.0_0"
    channel = make_channel(tmp_path / "ch", [Pkg("pytorch", "2.6.0", build=build), Pkg("pytorch", "2.6.0")])
    done = _fresh_env(tmp_path / "env", channel, f"pytorch ==2.6.0 {build}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"pytorch=2.6.0={build}"]


def test_a_spec_nothing_matches_is_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    channel = make_channel(tmp_path / "ch", [Pkg("pytorch", "2.6.0")])
    done = _fresh_env(tmp_path / "env", channel, "pytorch 2.7.0")
    assert done.returncode == 1
    assert done.stderr.startswith("fresh_env: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr

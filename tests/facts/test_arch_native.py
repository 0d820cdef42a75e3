"""`--arch native`: the archs of the local GPUs from nvidia-smi, and a clear exit-3 error on a
machine without one.

No GPU exists on CI machines, so the success path runs a stand-in nvidia-smi that prints what
the real one prints for `--query-gpu=compute_cap --format=csv,noheader` (one capability per
GPU line); the real nvidia-smi is exercised by the `gpu`-marked test.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from condapipe.cli.main import main
from condapipe.errors import EnvironmentProblem
from condapipe.facts.arch import parse_arch_list
from condapipe.facts.native import query_compute_caps

STANDIN = """#!/bin/sh
# stand-in for nvidia-smi: checks condapipe asks the documented query, answers like the driver
if [ "$1" != "--query-gpu=compute_cap" ] || [ "$2" != "--format=csv,noheader" ]; then
  echo "unexpected arguments: $*" >&2; exit 99
fi
{body}
"""


def install_standin(directory: Path, body: str) -> None:
    exe = directory / "nvidia-smi"
    exe.write_text(STANDIN.format(body=body))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def gpu_path(tmp_path, monkeypatch):
    """A PATH whose only nvidia-smi is the stand-in (or none at all)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("CONDAPIPE_NVIDIA_SMI", raising=False)
    monkeypatch.chdir(tmp_path)
    return bindir


def test_native_reads_every_gpu_and_merges_duplicates(gpu_path):
    install_standin(gpu_path, "printf '8.6\\n8.6\\n9.0\\n'")
    assert query_compute_caps() == ["8.6", "8.6", "9.0"]
    assert parse_arch_list("native", cuda="12.4").torch_arch_list() == "8.6;9.0"
    assert parse_arch_list("native;8.0+PTX", cuda="12.4").torch_arch_list() == "8.0+PTX;8.6;9.0"


def test_native_gpu_the_cuda_cannot_compile_is_a_usage_error(gpu_path):
    install_standin(gpu_path, "echo 12.0")
    result = CliRunner().invoke(
        main,
        [
            "config",
            "show",
            "pytorch",
            "--version",
            "2.4.1",
            "--python",
            "3.10",
            "--cuda",
            "12.4",
            "--arch",
            "native",
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: CUDA 12.4 cannot compile arch 12.0")


def test_no_nvidia_smi_is_an_environment_problem_with_a_fix(gpu_path):
    with pytest.raises(EnvironmentProblem) as err:
        query_compute_caps()
    assert "not on PATH" in str(err.value) and "--arch 8.6" in str(err.value)
    result = CliRunner().invoke(main, ["config", "show", "magma", "--cuda", "12.4", "--arch", "native"])
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --arch native needs nvidia-smi")
    assert list(gpu_path.parent.iterdir()) == [gpu_path]  # nothing written


def test_driver_failure_reports_nvidia_smis_own_message(gpu_path):
    install_standin(
        gpu_path,
        "echo 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the NVIDIA driver.'; exit 9",
    )
    with pytest.raises(EnvironmentProblem, match="NVIDIA-SMI has failed because it couldn't communicate"):
        query_compute_caps()


def test_no_gpu_listed(gpu_path):
    install_standin(gpu_path, "exit 0")
    with pytest.raises(EnvironmentProblem, match="lists no GPU"):
        query_compute_caps()


def test_old_driver_without_compute_cap_field(gpu_path):
    install_standin(gpu_path, "echo '[N/A]'")
    with pytest.raises(EnvironmentProblem, match="driver >= 510"):
        query_compute_caps() and parse_arch_list("native")


@pytest.mark.gpu
def test_real_nvidia_smi_on_a_gpu_machine():
    if shutil.which(os.environ.get("CONDAPIPE_NVIDIA_SMI", "nvidia-smi")) is None:
        pytest.fail("the gpu marker promises an NVIDIA GPU with nvidia-smi")
    archs = parse_arch_list("native")
    assert len(archs) >= 1
    assert all(a.major >= 3 for a in archs)

"""scripts/gpu_proof.py: what each arch list must do on a GPU, and how the proof behaves without one.

The GPU run itself (`-m gpu`) is the proof of issue 8: native resolves to the card's arch, a
matching SASS build runs, a SASS-only build for an older major arch fails with "no kernel image"
and is rejected by `condapipe verify --arch 9.0` before upload, and +PTX runs through the JIT.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


proof = _load("gpu_proof")
H100 = (9, 0)


@pytest.mark.parametrize(
    ("arch_list", "gpu", "how"),
    [
        ("9.0", H100, "sass"),
        ("8.0", H100, "no-kernel-image"),  # SASS never crosses a major arch
        ("8.0+PTX", H100, "jit"),
        ("8.0;9.0+PTX", H100, "sass"),
        ("8.0", (8, 6), "sass"),  # same major, older minor: binary compatible
        ("8.6", (8, 0), "no-kernel-image"),  # a newer minor does not run on an older card
        ("8.6+PTX", (8, 0), "no-kernel-image"),  # nor does its PTX
        ("9.0a", H100, "sass"),
        ("9.0a", (10, 0), "no-kernel-image"),  # arch-specific code runs on that arch only
        ("12.0+PTX", H100, "no-kernel-image"),  # PTX is not JIT-compiled for an older GPU
        ("7.5+PTX", (12, 0), "jit"),
    ],
)
def test_the_expected_outcome_follows_cuda_compatibility_rules(arch_list: str, gpu: tuple, how: str) -> None:
    assert proof.expected_run(arch_list, gpu) == how


@pytest.mark.parametrize(
    ("arch_list", "accepted"),
    [("9.0", True), ("8.0;9.0+PTX", True), ("8.0", False), ("8.0+PTX", False), ("9.0a", False)],
)
def test_the_verify_gate_wants_the_gate_archs_sass(arch_list: str, accepted: bool) -> None:
    assert proof.gate_accepts(arch_list, "9.0") is accepted


@pytest.mark.parametrize(
    ("code", "output", "outcome"),
    [
        (
            0,
            "cuda-smoke: OK saxpy on 1000000 elements on NVIDIA H100 (sm_90): checksum 1.0 (expected 1.0)",
            "ok",
        ),
        (
            1,
            "cuda-smoke: FAILED on NVIDIA H100 (sm_90): saxpy kernel: no kernel image is available for "
            "execution on the device",
            "no-kernel-image",
        ),
        (
            2,
            "cuda-smoke: no GPU available (cudaGetDeviceCount: no CUDA-capable device is detected)",
            "no-gpu",
        ),
        (
            1,
            "cuda-smoke: FAILED on X (sm_90): saxpy kernel: PTX JIT compilation was disabled",
            "jit-disabled",
        ),
        (1, "cuda-smoke: FAILED on X (sm_90): checksum 3.0 != expected 4.0", "error"),
        (0, "", "error"),  # exit 0 without the OK line proves nothing
    ],
)
def test_run_outcomes_are_read_from_the_cli_output(code: int, output: str, outcome: str) -> None:
    assert proof.classify_run(code, output) == outcome


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_without_a_gpu_native_fails_with_a_clear_reason_and_the_proof_says_what_it_did_not_check(
    tmp_path: Path,
) -> None:
    out = ["--out", tmp_path / "out"]
    proc = subprocess.run(
        [sys.executable, SCRIPTS / "gpu_proof.py", "--only", "native", "--work", tmp_path / "w", *out],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("the GPU runs were not (exit 3)")
    (case,) = json.loads((tmp_path / "out" / "gpu_proof.json").read_text())["cases"]
    assert case["build"].startswith("exit 3: error: --arch native needs nvidia-smi")
    assert case["failures"] == [] and case["unchecked"] == ["run: no GPU"]
    table = (tmp_path / "out" / "gpu_proof.md").read_text()
    assert "| native | native | - | exit 3: error: --arch native" in table


def test_an_unknown_case_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPTS / "gpu_proof.py", "--only", "volta", "--work", tmp_path],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no case named ['volta']")


@pytest.mark.gpu
@pytest.mark.slow
def test_on_the_gpu_every_arch_case_does_what_cuda_promises(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPTS / "gpu_proof.py", "--work", tmp_path / "w", "--out", tmp_path / "out"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = json.loads((tmp_path / "out" / "gpu_proof.json").read_text())
    cases = {c["name"]: c for c in doc["cases"]}
    assert cases["native"]["resolved"] == doc["capability"]
    assert all(not c["failures"] and not c["unchecked"] for c in cases.values())

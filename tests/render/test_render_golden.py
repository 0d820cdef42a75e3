"""Golden recipes: `condapipe render` output for reviewed specs, compared byte for byte.

Each case under tests/render/golden/<case>/ was read against docs/reference/pytorch-builder.md
(build strings, per-era requirements, run constraints, magma naming and gencode lists). A change
to rendering shows up here as a diff to review; regenerate with
CONDAPIPE_UPDATE_GOLDEN=1 and read the diff before committing it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from render_helpers import recipe_files, run_cli

from condapipe.buildspec.settings import spec_from_flags
from condapipe.errors import UsageError
from condapipe.render.recipe_dir import render_recipe

GOLDEN = Path(__file__).parent / "golden"

CASES: dict[str, tuple[str, ...]] = {
    "pytorch-1.8.0-cuda11.0-py3.8": ("pytorch", "--version", "1.8.0", "--cuda", "11.0", "--python", "3.8"),
    "pytorch-1.13.0-cuda11.8-py3.10": (
        "pytorch", "--version", "1.13.0", "--cuda", "11.8", "--python", "3.10",
    ),
    "pytorch-2.4.1-cuda12.8-py3.8-arch12.0": (
        "pytorch", "--version", "2.4.1", "--cuda", "12.8", "--python", "3.8", "--arch", "12.0",
    ),
    "pytorch-2.4.1-cpu-py3.11": ("pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.11"),
    "pytorch-2.4.1-matrix": (
        "pytorch", "--version", "2.4.1", "--python", "3.8", "--python", "3.10",
        "--cuda", "11.8", "--cuda", "12.4", "--cuda", "cpu",
    ),
    # Jetson: linux-aarch64 rendered on x86_64, OpenBLAS, USE_NCCL=0, no magma, JetPack's cuDNN;
    # TX2 on JetPack 4.6 (1.x, CUDA 10.2) also gets the CUDA_NUM_THREADS 512 patch.
    "pytorch-1.10.0-jetson-tx2": ("pytorch", "--jetson", "tx2"),
    "pytorch-2.5.0-jetson-orin": ("pytorch", "--jetson", "orin"),
    # libtorch: PyTorch's CMake build without Python (no Python axis), magma on linux-64 only.
    "libtorch-2.4.1-cuda12.4": ("libtorch", "--version", "2.4.1", "--cuda", "12.4"),
    "libtorch-2.5.0-jetson-orin": ("libtorch", "--jetson", "orin"),
    # torchvision against the pytorch build of the same flags (RTX 5090 seed: 0.19.1 with 2.4.1 for
    # arch 12.0), the cpu pair 0.21.0 / 2.6.0 (libwebp), and a Python x CUDA x cpu matrix.
    "torchvision-0.19.1-cuda12.8-py3.8-arch12.0": (
        "torchvision", "--version", "0.19.1", "--cuda", "12.8", "--python", "3.8", "--arch", "12.0",
    ),
    "torchvision-0.21.0-cpu-py3.11": (
        "torchvision", "--version", "0.21.0", "--cuda", "cpu", "--python", "3.11",
    ),
    "torchvision-0.14.1-matrix": (
        "torchvision", "--version", "0.14.1", "--python", "3.8", "--python", "3.10",
        "--cuda", "11.8", "--cuda", "cpu",
    ),
    "magma-cuda110": ("magma", "--cuda", "11.0"),
    "magma-cuda118": ("magma", "--cuda", "11.8"),
    "magma-cuda128": ("magma", "--cuda", "12.8"),
}  # fmt: skip


def _update_requested() -> bool:
    return os.environ.get("CONDAPIPE_UPDATE_GOLDEN") == "1"


def render_case(case: str, out: Path) -> Path:
    result = run_cli("render", *CASES[case], "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(autouse=True)
def _no_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Render from an empty directory so no condapipe.toml / pyproject of the caller leaks in."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_matches_golden(case: str, tmp_path: Path) -> None:
    got = recipe_files(render_case(case, tmp_path / "out"))
    golden_dir = GOLDEN / case
    if _update_requested():
        golden_dir.mkdir(parents=True, exist_ok=True)
        for stale in golden_dir.iterdir():
            stale.unlink()
        for name, data in got.items():
            (golden_dir / name).write_bytes(data)
    hint = "review the change, then regenerate with CONDAPIPE_UPDATE_GOLDEN=1"
    assert golden_dir.is_dir(), f"no golden recipe for {case}; {hint}"
    want = recipe_files(golden_dir)
    assert sorted(got) == sorted(want), f"file set of {case} changed; {hint}"
    for name in want:
        assert got[name].decode() == want[name].decode(), f"{case}/{name} differs from its golden; {hint}"


def test_same_spec_gives_byte_identical_files_across_processes(tmp_path: Path) -> None:
    """Determinism must not depend on hash seeds or on the process: render in two fresh processes."""
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"out-{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        args = CASES["pytorch-2.4.1-matrix"]
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from condapipe.cli.main import main; main()",
                "render",
                *args,
                "-o",
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(recipe_files(out))
    assert outs[0] == outs[1]


def test_rerender_into_previous_render_replaces_it_identically(tmp_path: Path) -> None:
    out = render_case("magma-cuda118", tmp_path / "out")
    first = recipe_files(out)
    (out / "meta.yaml").write_text("stale\n")
    render_case("magma-cuda118", out)
    assert recipe_files(out) == first


def test_magma_without_known_sha256_is_refused(tmp_path: Path) -> None:
    """A tarball source without a checksum is never rendered: one-line UsageError, nothing written."""
    spec = spec_from_flags("magma", {"cuda": ("11.0",)})
    unverified = dataclasses.replace(spec, source=dataclasses.replace(spec.source, sha256=None))
    out = tmp_path / "out"
    with pytest.raises(UsageError, match="no sha256 known") as caught:
        render_recipe(unverified, out)
    assert "\n" not in str(caught.value)
    assert not out.exists()

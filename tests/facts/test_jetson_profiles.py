"""`--jetson BOARD`: one flag gives a Jetson build the settings users otherwise copy from forums.

Each board maps to its GPU arch and to the CUDA, cuDNN, Python and PyTorch of the JetPack it
runs (the newest by default, another one through --cuda); the target is linux-aarch64 with
OpenBLAS. Explicit flags still win where they make sense, and flags that contradict the board
are one-line usage errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from render_helpers import run_cli

from condapipe.buildspec.build_spec import build_spec


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def _spec(*args: str) -> dict:
    result = run_cli("config", "show", *args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    return data.get("spec", data)


@pytest.mark.parametrize(
    ("board", "arch", "cuda", "cudnn", "python", "version"),
    [
        ("nano", "5.3", "10.2", "8.2.1", "3.6", "1.10.0"),  # JetPack 4.6
        ("tx2", "6.2", "10.2", "8.2.1", "3.6", "1.10.0"),  # JetPack 4.6
        ("xavier", "7.2", "11.4", "8.6.0", "3.8", "2.0.0"),  # JetPack 5.1
        ("orin", "8.7", "12.6", "9.3.0", "3.10", "2.5.0"),  # JetPack 6.1
    ],
)
def test_each_board_defaults_to_its_arch_and_newest_jetpack(
    board: str, arch: str, cuda: str, cudnn: str, python: str, version: str
) -> None:
    spec = _spec("pytorch", "--jetson", board)
    (variant,) = spec["cuda_variants"]
    assert (variant["cuda"], variant["cudnn"]) == (cuda, cudnn)
    assert variant["archs"]["torch_arch_list"] == arch
    assert (spec["platform"], spec["blas"], spec["jetson"]) == ("linux-aarch64", "openblas", board)
    assert (spec["pythons"], spec["version"]) == ([python], version)


def test_the_jetson_env_points_at_jetpacks_toolkit_and_cudnn() -> None:
    env = _spec("pytorch", "--jetson", "orin")["extra_env"]
    assert env["CUDA_HOME"] == "/usr/local/cuda"
    assert env["CUDNN_INCLUDE_DIR"] == "/usr/include"
    assert env["CUDNN_LIB_DIR"] == "/usr/lib/aarch64-linux-gnu"
    assert env["CUDNN_LIBRARY"] == "/usr/lib/aarch64-linux-gnu/libcudnn.so"
    assert env["USE_QNNPACK"] == "0"


@pytest.mark.parametrize(
    ("board", "cuda", "cudnn", "python", "version"),
    [
        ("orin", "12.2", "8.9.4", "3.10", "2.3.0"),  # JetPack 6.0
        ("orin", "11.4", "8.6.0", "3.8", "2.0.0"),  # JetPack 5.1
        ("xavier", "10.2", "8.2.1", "3.6", "1.10.0"),  # JetPack 4.6
    ],
)
def test_cuda_selects_one_of_the_boards_jetpacks(
    board: str, cuda: str, cudnn: str, python: str, version: str
) -> None:
    spec = _spec("pytorch", "--jetson", board, "--cuda", cuda)
    (variant,) = spec["cuda_variants"]
    assert (variant["cuda"], variant["cudnn"], spec["pythons"], spec["version"]) == (
        cuda,
        cudnn,
        [python],
        version,
    )


def test_explicit_flags_win_over_the_profile() -> None:
    # JetPack 4.6 (CUDA 10.2) with 1.10.2, not the profile's 1.10.0: a pair upstream built. (A release
    # with a JetPack's CUDA that neither upstream nor NVIDIA built, 1.13.1 + 11.4, is refused: test_pairs.py.)
    spec = _spec(
        "pytorch", "--jetson", "xavier", "--cuda", "10.2", "--version", "1.10.2", "--python", "3.9",
        "--arch", "6.2;7.2", "--cudnn", "8.6.1", "--env", "USE_QNNPACK=1",
    )  # fmt: skip
    (variant,) = spec["cuda_variants"]
    assert (spec["version"], spec["pythons"]) == ("1.10.2", ["3.9"])
    assert variant["archs"]["torch_arch_list"] == "6.2;7.2"
    assert variant["cudnn"] == "8.6.1"
    assert spec["extra_env"]["USE_QNNPACK"] == "1"


def test_the_profile_works_for_libtorch_and_cuda_smoke() -> None:
    libtorch = _spec("libtorch", "--jetson", "orin")
    assert (libtorch["version"], libtorch["pythons"], libtorch["platform"]) == ("2.5.0", [], "linux-aarch64")
    smoke = _spec("cuda-smoke", "--jetson", "tx2")
    assert smoke["cuda_variants"][0]["archs"]["torch_arch_list"] == "6.2"
    assert smoke["cuda_variants"][0]["cuda"] == "10.2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("pytorch", "--jetson", "agx"), "unknown Jetson board 'agx'; valid: nano tx2 xavier orin"),
        (("pytorch", "--jetson", "orin", "--platform", "linux-64"),
         "Jetson boards are linux-aarch64, not linux-64"),
        (("pytorch", "--jetson", "orin", "--blas", "mkl"), "Jetson builds use openblas (no mkl for Tegra)"),
        (("pytorch", "--jetson", "orin", "--cuda", "cpu"), "--jetson builds use the board's GPU"),
        (("pytorch", "--jetson", "tx2", "--cuda", "12.6"),
         "Jetson tx2 has no JetPack with CUDA 12.6; valid --cuda: 10.2 (JetPack 4.6)"),
        (("pytorch", "--jetson", "orin", "--cuda", "12.2", "--cuda", "12.6"),
         "a Jetson board runs one JetPack"),
        (("magma", "--jetson", "orin"), "--jetson does not apply to magma"),
        (("pytorch", "--jetson", "orin", "--python", "3.6"), "does not support Python 3.6"),
    ],
)  # fmt: skip
def test_contradictions_are_one_line_usage_errors(
    args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = run_cli("render", *args, "-o", str(out))
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("error: ")
    assert message in result.output
    assert not out.exists()


def test_a_shared_config_file_board_applies_where_it_can(tmp_path: Path) -> None:
    config = tmp_path / "condapipe.toml"
    config.write_text('jetson = "orin"\n')
    spec = _spec("pytorch", "--config", str(config))
    assert (spec["jetson"], spec["platform"]) == ("orin", "linux-aarch64")
    # magma has no Jetson build: the shared setting is ignored for it, as other shared keys are.
    magma = _spec("magma", "--cuda", "12.8", "--config", str(config))
    assert (magma["jetson"], magma["platform"]) == (None, "linux-64")


def test_builds_without_a_board_are_unchanged() -> None:
    spec = build_spec("pytorch", {"version": "2.4.1", "cuda": ["12.4"], "python": ["3.10"]})
    assert spec.jetson is None
    assert "CUDA_HOME" not in dict(spec.extra_env)

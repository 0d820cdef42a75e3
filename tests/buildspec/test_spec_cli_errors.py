"""Every way to get the spec flags wrong: exit code 2, exactly one line on stderr (no traceback),
and nothing written, through both `config show` and `render -o DIR`."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from condapipe.cli.main import main

OK = ["--version", "2.4.1", "--python", "3.10", "--cuda", "12.4"]

# (flags for pytorch unless the first item names another package, expected start of the message)
ERRORS = [
    (["--python", "3.10", "--cuda", "12.4"], "pytorch needs --version; valid: 1.8.0"),
    (
        ["--version", "2.4.7", "--python", "3.10", "--cuda", "12.4"],
        "unknown pytorch version '2.4.7'; valid: 1.8.0",
    ),
    (["--version", "2.4.1", "--cuda", "12.4"], "pytorch needs --python; valid: 3.8 3.9 3.10 3.11 3.12"),
    (["--version", "2.4.1", "--python", "3.7", "--cuda", "12.4"], "pytorch 2.4 does not support Python 3.7"),
    (["--version", "2.4.1", "--python", "3.10"], "pytorch needs --cuda X.Y or cpu; valid: cpu 9.2"),
    ([*OK[:4], "--cuda", "12.7"], "unknown CUDA version '12.7'; valid: cpu 9.2"),
    ([*OK, "--arch", "12.0"], "CUDA 12.4 cannot compile arch 12.0; it accepts: 5.0"),
    ([*OK[:4], "--cuda", "11.8", "--arch", "12.0"], "CUDA 11.8 cannot compile arch 12.0"),
    ([*OK[:4], "--cuda", "12.8", "--arch", "3.5"], "CUDA 12.8 cannot compile arch 3.5"),
    ([*OK, "--arch", "banana"], "cannot parse arch 'banana'"),
    ([*OK[:4], "--cuda", "13.0", "--arch", "10.0;10.0f"], "10.0 and 10.0f produce the same SASS"),
    ([*OK[:4], "--cuda", "cpu", "--arch", "8.0"], "cpu builds have no arch list"),
    ([*OK, "--platform", "win-64"], "unknown platform 'win-64'"),
    ([*OK, "--platform", "linux-aarch64", "--blas", "mkl"], "BLAS mkl is not available on linux-aarch64"),
    ([*OK, "--blas", "atlas"], "unknown BLAS 'atlas'"),
    ([*OK, "--cudnn", "9.x"], "cannot read cuDNN version '9.x'"),
    ([*OK, "--build-number", "two"], "--build-number must be a non-negative integer"),
    ([*OK, "--source", "does-not-exist"], "--source does-not-exist: no such directory"),
    ([*OK, "--env", "JUSTANAME"], "--env expects NAME=VALUE"),
    ([*OK, "--config", "missing.toml"], "config file missing.toml does not exist"),
    (["@magma", "--cuda", "cpu"], "magma is a CUDA package"),
    (["@magma", "--cuda", "11.0", "--cuda", "11.8"], "these CUDAs use different magma versions"),
    (["@magma", "--cuda", "11.8", "--python", "3.10"], "magma has no Python variants"),
    (["@magma", "--cuda", "11.8", "--cudnn", "8.7.0"], "--cudnn does not apply to magma"),
    (["@magma", "--cuda", "11.8", "--blas", "mkl"], "--blas does not apply to magma"),
    (["@magma", "--cuda", "11.8", "--version", "two"], "invalid version 'two'"),
    (
        ["@cuda-smoke", "--cuda", "13.0", "--arch", "7.0"],
        "CUDA 13.0 cannot compile arch 7.0; it accepts: 7.5",
    ),
    (["@tensorflow", "--cuda", "12.4"], "unknown package 'tensorflow'; choose one of"),
]


def _split(flags: list[str]) -> tuple[str, list[str]]:
    if flags and flags[0].startswith("@"):
        return flags[0][1:], flags[1:]
    return "pytorch", flags


def _check_one_line_exit_2(result, expected: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {expected}"), lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""


# `config show` and `render` fill what these leave open from the tables and the machine, as `build`
# does (test_headline_defaults.py), so they are no errors there.
DEFAULTED = ("pytorch needs --version", "pytorch needs --python", "pytorch needs --cuda")
CONFIG_ERRORS = [e for e in ERRORS if not e[1].startswith(DEFAULTED)]


@pytest.mark.parametrize(("flags", "expected"), CONFIG_ERRORS, ids=[e[1][:40] for e in CONFIG_ERRORS])
def test_config_show_errors(tmp_path, monkeypatch, flags, expected):
    monkeypatch.chdir(tmp_path)
    package, rest = _split(flags)
    result = CliRunner().invoke(main, ["config", "show", package, *rest])
    _check_one_line_exit_2(result, expected)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("flags", "expected"), CONFIG_ERRORS, ids=[e[1][:40] for e in CONFIG_ERRORS])
def test_render_errors_write_nothing(tmp_path, monkeypatch, flags, expected):
    monkeypatch.chdir(tmp_path)
    package, rest = _split(flags)
    result = CliRunner().invoke(main, ["render", package, *rest, "-o", "out"])
    _check_one_line_exit_2(result, expected)
    assert list(tmp_path.iterdir()) == []


def test_config_show_without_package_or_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "show"])
    _check_one_line_exit_2(result, "no package given")


def test_warnings_go_to_stderr_one_line_each_and_the_spec_still_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["config", "show", "pytorch", "--version", "1.8.0", "--python", "3.8", "--cuda", "11.0"]
    )
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        "chose arch 3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0: pytorch's default list for CUDA 11.0; "
        "5.2 5.3 run 5.0's code, 6.2 run 6.1's code, 7.2 run 7.0's code, "
        "8.6 8.7 8.8 8.9 run 8.0's code (--arch to change)",
        "chose cudnn 8.0.5: the CUDA table's cuDNN for CUDA 11.0 (--cudnn to change)",
        "warning: pytorch 1.8.0 was not built upstream for CUDA 11.0 (upstream: 10.1 10.2 11.1); it "
        "compiles as rendered: conda-forge built pytorch 1.8.0 for CUDA 11.0 with no CUDA-specific patch "
        "(conda-forge/pytorch-cpu-feedstock de47df8b, .ci_support/linux_64_cuda_compiler_version11.0*)",
    ]
    assert "3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0" in result.stdout

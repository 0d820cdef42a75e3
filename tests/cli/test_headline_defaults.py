"""The three headline commands as a newcomer types them, and what the CLI tells that newcomer.

`build pytorch --cuda 11.0` and `build magma` fill in what the flags leave open (from the tables
and this machine) and say so, one line per choice; explicit flags and condapipe.toml win; when
nothing can be inferred the error lists the choices and the command to run next. `upload` with
nothing built says where it looked; `--dry-run` is an offline preview; `doctor` alone checks the
machine; `--debug` goes anywhere.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import needs_system_tool
from fake_anaconda import make_package
from rich.console import Console

from condapipe.buildspec.defaults import FoundToolkit, fill_defaults
from condapipe.cli.main import main
from condapipe.plan.report import print_summary

STANDIN_NVCC = Path(__file__).parent.parent / "standins" / "doctor" / "nvcc-11.0" / "nvcc"
NO_TOOLKITS: tuple[FoundToolkit, ...] = ()


def cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    """Run condapipe in tmp_path (a fresh project dir) with its own work and output dirs."""
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.fixture(autouse=True)
def fresh_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def empty_cuda_roots(tmp_path: Path) -> dict[str, str]:
    roots = tmp_path / "no-toolkits"
    roots.mkdir(exist_ok=True)
    return {"CONDAPIPE_CUDA_ROOTS": str(roots)}


def no_nvcc_env(tmp_path: Path, roots: Path | None = None) -> dict[str, str]:
    """PATH without nvcc (the interpreter's folder keeps gcc-free tools out of the picture)."""
    return {"PATH": "/usr/bin:/bin", "CONDAPIPE_CUDA_ROOTS": str(roots or tmp_path / "no-toolkits")}


# ---------------------------------------------------------------- build pytorch --cuda 11.0


def test_build_pytorch_with_only_a_cuda_says_what_it_chose_and_why(tmp_path: Path) -> None:
    result = cli(tmp_path, "build", "pytorch", "--cuda", "11.0", "--dry-run", "--json")
    lines = result.stderr.splitlines()
    # Upstream built 1.7.0/1.7.1 for 11.0, older than the tables (from 1.8): the oldest they have,
    # 1.8.0, as the seed's own flow (`--version 1.8.0 --cuda 11.0`) did; the truth is said.
    assert lines[0] == (
        "chose pytorch 1.8.0: upstream built pytorch for CUDA 11.0 only in 1.7.0 and 1.7.1, older than "
        "condapipe's tables (they start at 1.8.0); the oldest release in them (--version to change)"
    )
    assert lines[1].startswith("chose python 3.9: newest Python pytorch 1.8.0 supports (this interpreter's ")
    assert lines[2] == (
        "chose arch 3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0: pytorch's default list for CUDA 11.0; "
        "5.2 5.3 run 5.0's code, 6.2 run 6.1's code, 7.2 run 7.0's code, "
        "8.6 8.7 8.8 8.9 run 8.0's code (--arch to change)"
    )
    assert lines[3] == "chose cudnn 8.0.5: the CUDA table's cuDNN for CUDA 11.0 (--cudnn to change)"
    assert lines[4].startswith("warning: pytorch 1.8.0 was not built upstream for CUDA 11.0")
    assert "it compiles as rendered: conda-forge built pytorch 1.8.0 for CUDA 11.0" in lines[4]
    plan = json.loads(result.stdout)
    assert [s["id"] for s in plan["steps"]][-1] == "publish:pytorch-1.8.0-py3.9-cuda11.0"
    assert result.exit_code == (0 if plan["doctor"]["ok"] else 3)


def test_a_cuda_some_release_was_built_for_picks_the_newest_such_release() -> None:
    settings, choices = fill_defaults(
        "pytorch", {"cuda": ["12.4"]}, toolkits=lambda: NO_TOOLKITS, python="3.12"
    )
    assert settings["version"] == "2.6.0" and settings["python"] == ["3.12"]
    assert [c.line("pytorch") for c in choices] == [
        "chose pytorch 2.6.0: newest release built upstream for CUDA 12.4 (--version to change)",
        "chose python 3.12: this interpreter's Python, which pytorch 2.6.0 supports (--python to change)",
    ]


def test_given_pythons_narrow_the_release_and_are_kept() -> None:
    settings, choices = fill_defaults(
        "pytorch", {"cuda": ["11.8"], "python": ["3.8"]}, toolkits=lambda: NO_TOOLKITS, python="3.12"
    )
    assert settings["version"] == "2.4.1"  # the newest 11.8 release that still has Python 3.8
    assert [c.key for c in choices] == ["version"]
    assert "CUDA 11.8 and Python 3.8" in choices[0].reason


def test_explicit_flags_choose_nothing_and_the_spec_warning_shows_in_build_doctor_and_config(
    tmp_path: Path,
) -> None:
    flags = ["pytorch", "--version", "1.8.0", "--python", "3.8", "--cuda", "11.0"]
    for command in (["build", *flags, "--dry-run"], ["doctor", *flags], ["config", "show", *flags]):
        result = cli(tmp_path, *command)
        chosen = [line.split()[1] for line in result.stderr.splitlines() if line.startswith("chose ")]
        assert chosen == ["arch", "cudnn"], command  # the version, Python and CUDA were given
        assert "warning: pytorch 1.8.0 was not built upstream for CUDA 11.0" in result.stderr, command


def test_the_config_file_wins_over_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "condapipe.toml").write_text('version = "2.4.1"\n')
    result = cli(tmp_path, "config", "show", "pytorch", "--cuda", "12.4", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["spec"]["version"] == "2.4.1"
    assert [c["key"] for c in data["chosen"]] == ["python", "arch", "cudnn"]


# ---------------------------------------------------------------- build magma


@needs_system_tool("nvcc")
def test_build_magma_takes_the_cuda_of_the_nvcc_on_path(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    result = cli(tmp_path, "build", "magma", "--dry-run", "--json")
    first = result.stderr.splitlines()[0]
    assert first.startswith("chose cuda ") and f"the CUDA of the nvcc on PATH ({nvcc})" in first
    plan = json.loads(result.stdout)
    cuda = first.split()[2].rstrip(":")
    assert plan["steps"][0]["id"].startswith(f"render:magma-cuda{cuda.replace('.', '')}-")


def test_without_nvcc_the_only_usr_local_toolkit_is_used(tmp_path: Path) -> None:
    roots = tmp_path / "local"
    (roots / "cuda-11.0" / "bin").mkdir(parents=True)
    shutil.copy(STANDIN_NVCC, roots / "cuda-11.0" / "bin" / "nvcc")
    result = cli(tmp_path, "config", "show", "magma", env=no_nvcc_env(tmp_path, roots))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == (
        f"chose cuda 11.0: the only CUDA toolkit found ({roots / 'cuda-11.0'}; no nvcc on PATH) "
        "(--cuda to change)"
    )


def test_with_nothing_to_infer_from_the_error_lists_the_choices_and_the_next_command(tmp_path: Path) -> None:
    (tmp_path / "no-toolkits").mkdir()
    result = cli(tmp_path, "build", "magma", env=no_nvcc_env(tmp_path))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: magma needs a CUDA version and this machine has none to take it from")
    assert "valid: 9.2 10.0" in line and "13.0" in line
    assert line.endswith("run: condapipe build magma --cuda 13.0")


def test_several_toolkits_and_no_nvcc_on_path_ask_which_one(tmp_path: Path) -> None:
    roots = tmp_path / "local"
    for version in ("11.0", "11.0-copy"):
        (roots / f"cuda-{version}" / "bin").mkdir(parents=True)
        shutil.copy(STANDIN_NVCC, roots / f"cuda-{version}" / "bin" / "nvcc")
    result = cli(tmp_path, "build", "magma", env=no_nvcc_env(tmp_path, roots))
    assert result.exit_code == 2
    assert "several toolkits" in result.stderr and "run: condapipe build magma --cuda 11.0" in result.stderr


# ---------------------------------------------------------------- upload --channel myorg


def test_upload_with_nothing_built_says_where_it_looked_and_what_to_run(tmp_path: Path) -> None:
    for extra in ([], ["--dry-run"]):
        result = cli(tmp_path, "upload", "--channel", "myorg", *extra, env={"ANACONDA_API_TOKEN": ""})
        assert result.exit_code == 2
        (line,) = result.stderr.splitlines()
        assert f"nothing to upload: no .conda or .tar.bz2 package under {tmp_path / 'channel'}" in line
        assert "linux-64/" in line and "condapipe build" in line


def test_upload_dry_run_previews_offline_without_a_token(tmp_path: Path) -> None:
    make_package(tmp_path / "channel", "pytorch-mutex", "1.0", build="cuda")
    # An unreachable site: a dry run that made any request would fail here.
    env = {"ANACONDA_API_TOKEN": "", "BINSTAR_API_TOKEN": "", "HOME": str(tmp_path)}
    args = ["upload", "--channel", "myorg", "--dry-run", "--no-verify", "--site-url", "http://127.0.0.1:9"]
    result = cli(tmp_path, *args, "--json", env=env)
    assert result.exit_code == 0, result.stderr
    (only,) = json.loads(result.stdout)["files"]
    assert only["status"] == "would-upload"
    assert only["target"] == "http://127.0.0.1:9/myorg/noarch/pytorch-mutex-1.0-cuda.conda [main]"


# ---------------------------------------------------------------- doctor, --debug, renamed packages


def test_doctor_without_a_package_checks_the_machine_for_the_default_build(tmp_path: Path) -> None:
    result = cli(tmp_path, "doctor", "--json", env=empty_cuda_roots(tmp_path))
    lines = result.stderr.splitlines()
    assert (
        lines[0] == "no package given: checking this machine for `condapipe build pytorch` with its defaults"
    )
    report = json.loads(result.stdout)
    assert report["package"] == "pytorch"
    assert {f["check"] for f in report["findings"]} >= {"nvcc", "gcc", "ram", "disk", "cmake"}
    assert result.exit_code == (0 if report["ok"] else 3)


def test_doctor_without_a_package_on_a_machine_without_cuda_reports_instead_of_refusing(
    tmp_path: Path,
) -> None:
    (tmp_path / "no-toolkits").mkdir()
    result = cli(tmp_path, "doctor", "--json", env=no_nvcc_env(tmp_path))
    report = json.loads(result.stdout)
    nvcc = next(f for f in report["findings"] if f["check"] == "nvcc")
    assert nvcc["level"] == "block" and "no nvcc on PATH" in nvcc["message"]
    assert result.exit_code == 3


def test_debug_is_accepted_after_the_subcommand(tmp_path: Path) -> None:
    for args in (["verify", "missing.conda", "--debug"], ["--debug", "verify", "missing.conda"]):
        result = cli(tmp_path, *args)
        assert result.exit_code == 2, result.output
        assert "Traceback" in result.stderr and "No such option" not in result.stderr
        assert result.stderr.splitlines()[-1] == "error: missing.conda: no such package"


def test_a_renamed_package_is_never_an_internal_error(tmp_path: Path) -> None:
    made = make_package(tmp_path / "out", "pytorch-mutex", "1.0", build="cuda")
    renamed = tmp_path / "orig.conda"
    shutil.copy(made, renamed)
    for args in (["verify", str(renamed)], ["fix", str(renamed), "-o", str(tmp_path / "fixed")]):
        result = cli(tmp_path, *args)
        assert "internal error" not in result.output and "Traceback" not in result.output
        assert result.exit_code in (0, 2), result.output  # works, or one clear line saying why not
        if result.exit_code == 2:
            assert len(result.stderr.splitlines()) == 1


# ---------------------------------------------------------------- the results table


def test_the_results_keep_whole_package_file_names_at_80_columns(tmp_path: Path) -> None:
    name = "pytorch-2.4.1-py3.10_cuda12.4_cudnn9.1.0_0.conda"
    report = {
        "ok": True,
        "seconds": 1.0,
        "steps": [],
        "prerequisites_from_channels": [],
        "channel": str(tmp_path),
        "install": "",
        "package_details": [
            {
                "path": str(tmp_path / "linux-64" / name),
                "size": 10 << 20,
                "archs": "5.0;6.0;7.0;7.5;8.0;8.6;9.0",
                "verify": {"ok": True},
                "tests": "passed",
            }
        ],
    }
    for width in (80, 200):
        console = Console(width=width, record=True, color_system=None, file=io.StringIO())
        print_summary(report, console)
        assert f"linux-64/{name}" in console.export_text(), width


# ---------------------------------------------------------------- render chooses as build does


@pytest.mark.parametrize(
    "args",
    [("pytorch",), ("pytorch", "--cuda", "12.4"), ("libtorch", "--cuda", "cpu"), ("magma",)],
    ids=["pytorch", "pytorch-cuda-12.4", "libtorch-cpu", "magma"],
)
def test_render_chooses_the_defaults_build_chooses_and_renders_what_build_renders(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """`render X` and `build X --dry-run` go through one resolution: the same "chose" lines, and the
    recipe render writes is the spec of the plan's render step for X (the machine: one CUDA 11.0
    toolkit in /usr/local, no nvcc on PATH)."""
    roots = tmp_path / "local"
    (roots / "cuda-11.0" / "bin").mkdir(parents=True)
    shutil.copy(STANDIN_NVCC, roots / "cuda-11.0" / "bin" / "nvcc")
    env = no_nvcc_env(tmp_path, roots)
    built = cli(tmp_path, "build", *args, "--dry-run", "--json", env=env)
    rendered = cli(tmp_path, "render", *args, "-o", "recipe", "--json", env=env)
    assert rendered.exit_code == 0, rendered.stderr

    def chose(result) -> list[str]:  # type: ignore[no-untyped-def]
        return [line for line in result.stderr.splitlines() if line.startswith(("chose ", "warning: "))]

    assert chose(rendered) == chose(built)
    assert any(line.startswith("chose ") for line in chose(rendered))
    spec = json.loads(rendered.stdout)["spec"]
    steps = [s for s in json.loads(built.stdout)["steps"] if s["id"].startswith(f"render:{args[0]}-")]
    planned = steps[-1]["inputs"]["spec"]
    for key in ("package", "version", "build_number", "pythons", "platform", "blas"):
        assert planned[key] == spec[key], key
    assert [v["cuda"] for v in planned["cuda_variants"]] == [v["cuda"] for v in spec["cuda_variants"]]

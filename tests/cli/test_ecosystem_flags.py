"""Flags people bring from conda-build, rattler-build and anaconda-client (issue 24, item 6).

`-m/--variant-config FILE` (a conda_build_config.yaml) is the same matrix as --python/--cuda;
`--target-platform` is --platform; `--output-folder` is --output-dir; the upload owner is
`--channel`, `--owner`, `-u` or `--user`, while `-c/--channel` of build and plan stays a channel
searched for dependencies. `condapipe --help` lists the commands in the order of the work, each
with the whole first line of its help.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_anaconda import make_package

from condapipe.cli.main import COMMAND_MODULES, main


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None):
    """Run condapipe in `cwd` (the autouse fixture made it the current folder)."""
    assert Path.cwd() == cwd
    return CliRunner().invoke(main, list(args), env=env)


@pytest.fixture(autouse=True)
def fresh_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _variants(tmp_path: Path, *args: str) -> list[str]:
    result = cli(tmp_path, "plan", "pytorch", "--version", "2.4.1", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return [v["id"] for v in json.loads(result.stdout)["variants"]]


def test_a_conda_build_variant_file_gives_the_same_matrix_as_the_flags(tmp_path: Path) -> None:
    (tmp_path / "conda_build_config.yaml").write_text(
        "python:\n  - 3.10\n  - 3.11\ncuda_compiler_version:\n  - 12.1\n  - None\n", encoding="utf-8"
    )
    by_file = _variants(tmp_path, "-m", "conda_build_config.yaml")
    by_flags = _variants(tmp_path, "--python", "3.10", "--python", "3.11", "--cuda", "12.1", "--cuda", "cpu")
    assert by_file == by_flags
    assert "pytorch-2.4.1-py3.11-cuda12.1" in by_file and "pytorch-2.4.1-py3.10-cpu" in by_file
    assert _variants(tmp_path, "--variant-config", "conda_build_config.yaml") == by_file
    # an explicit flag wins over the file
    assert _variants(tmp_path, "-m", "conda_build_config.yaml", "--python", "3.12") == _variants(
        tmp_path, "--python", "3.12", "--cuda", "12.1", "--cuda", "cpu"
    )


def test_a_variant_key_condapipe_has_no_flag_for_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "v.yaml").write_text("python: [3.11]\nc_compiler_version: [13]\n", encoding="utf-8")
    result = cli(tmp_path, "plan", "pytorch", "-m", "v.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: --variant-config v.yaml: key 'c_compiler_version' has no condapipe"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    missing = cli(tmp_path, "plan", "pytorch", "-m", "nope.yaml")
    assert missing.exit_code == 2 and "nope.yaml" in missing.stderr


def _spec(tmp_path: Path, *args: str) -> dict:
    result = cli(
        tmp_path, "config", "show", "pytorch", "--version", "2.4.1", "--cuda", "12.4", *args, "--json"
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_target_platform_is_platform(tmp_path: Path) -> None:
    assert _spec(tmp_path, "--target-platform", "linux-aarch64", "--blas", "openblas") == _spec(
        tmp_path, "--platform", "linux-aarch64", "--blas", "openblas"
    )


def test_output_folder_is_output_dir(tmp_path: Path) -> None:
    args = ("build", "cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--dry-run", "--json")
    folder = json.loads(cli(tmp_path, *args, "--output-folder", "out").stdout)
    outdir = json.loads(cli(tmp_path, *args, "--output-dir", "out").stdout)
    assert folder["steps"] == outdir["steps"]
    assert folder["steps"][-1]["inputs"]["channel"] == str(tmp_path / "out")


@pytest.mark.parametrize("flag", ["--channel", "--owner", "-u", "--user"])
def test_the_upload_owner_takes_anaconda_clients_names_too(tmp_path: Path, flag: str) -> None:
    make_package(tmp_path / "channel", "pytorch-mutex", "1.0", build="cuda")
    env = {"ANACONDA_API_TOKEN": "", "BINSTAR_API_TOKEN": "", "HOME": str(tmp_path)}
    args = ["upload", flag, "myorg", "--dry-run", "--no-verify", "--site-url", "http://127.0.0.1:9", "--json"]
    result = cli(tmp_path, *args, env=env)
    assert result.exit_code == 0, result.stderr
    (only,) = json.loads(result.stdout)["files"]
    assert only["target"] == "http://127.0.0.1:9/myorg/noarch/pytorch-mutex-1.0-cuda.conda [main]"


def test_help_says_which_channel_is_which() -> None:
    build = CliRunner().invoke(main, ["build", "--help"]).stdout
    upload = CliRunner().invoke(main, ["upload", "--help"]).stdout
    assert "-c, --channel CHANNEL" in build and "searched for build dependencies" in build
    assert "condapipe upload --channel/--owner ORG" in " ".join(build.split())
    assert "-u, --channel, --owner, --user ORG" in upload and "anaconda.org owner" in upload


def test_help_lists_the_commands_in_workflow_order_with_their_whole_first_line() -> None:
    text = CliRunner().invoke(main, ["--help"]).stdout
    section = text.split("Commands:\n", 1)[1].split("\n\n", 1)[0]  # the example follows the list
    entries: dict[str, str] = {}
    name = ""
    for line in section.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, rest = line.strip().partition(" ")
            entries[name] = rest.strip()
        elif name:
            entries[name] += " " + line.strip()
    assert list(entries) == [
        "doctor",
        "render",
        "build",
        "fix",
        "verify",
        "index",
        "wheels",
        "upload",
        "env",
        "clean",
        "plan",
        "patches",
        "config",
    ]
    assert list(COMMAND_MODULES) == list(entries)
    for name, shown in entries.items():
        command = main.get_command(None, name)  # type: ignore[arg-type]
        first = inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
        assert shown == first, name
        assert not shown.endswith("...")

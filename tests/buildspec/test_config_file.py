"""condapipe.toml / [tool.condapipe]: the file supplies defaults, CLI flags override them, and a
broken file is a one-line error naming it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from condapipe.buildspec.config_file import find_config, load_config, upload_settings
from condapipe.buildspec.settings import spec_from_flags
from condapipe.cli.main import main
from condapipe.errors import UsageError

CONFIG = """
package = "pytorch"
version = "2.4.1"
python = ["3.10", "3.11"]
cuda = "12.4"
arch = "8.0;9.0"
build_number = 3
source = "checkout"

[env]
USE_FLASH_ATTENTION = "0"

[packages.magma]
cuda = ["11.8"]

[upload]
site_url = "https://conda.example.org/api"
channel = "my-org"
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "checkout").mkdir()
    (tmp_path / "condapipe.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_config_file_fills_the_spec(project):
    s = spec_from_flags("pytorch", {})
    assert s.version == "2.4.1" and s.pythons == ("3.10", "3.11") and s.build_number == 3
    assert s.cudas == ("12.4",) and s.cuda_variants[0].archs.torch_arch_list() == "8.0;9.0"
    assert s.source.kind == "path" and s.source.path == (project / "checkout").resolve()
    assert dict(s.extra_env)["USE_FLASH_ATTENTION"] == "0"


def test_cli_flags_override_the_file(project):
    s = spec_from_flags(
        "pytorch", {"python": ("3.12",), "cuda": ("11.8",), "arch": "Hopper", "build_number": "0"}
    )
    assert s.pythons == ("3.12",) and s.cudas == ("11.8",) and s.build_number == 0
    assert s.cuda_variants[0].archs.torch_arch_list() == "9.0"
    assert s.version == "2.4.1"  # not overridden: still from the file
    s2 = spec_from_flags("pytorch", {"env": ("USE_FLASH_ATTENTION=1", "X=y")})
    assert dict(s2.extra_env)["USE_FLASH_ATTENTION"] == "1" and dict(s2.extra_env)["X"] == "y"


def test_per_package_tables_override_the_top_level(project):
    s = spec_from_flags("magma", {})
    assert s.cudas == ("11.8",) and s.version == "2.6.1"
    # python/arch of the shared file are ignored quietly for magma (they are not its flags)
    assert s.pythons == ()


def test_config_show_prints_the_resolved_spec_and_the_file(project):
    result = cli("config", "show", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["config_file"] == str((project / "condapipe.toml").resolve())
    assert data["spec"]["package"] == "pytorch" and data["spec"]["pythons"] == ["3.10", "3.11"]
    assert data["upload"]["site_url"] == "https://conda.example.org/api"
    table = cli("config", "show", "--cuda", "cpu")
    assert table.exit_code == 0 and "pytorch 2.4.1" in table.stdout and "cpu" in table.stdout


def test_pyproject_tool_section_is_found(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.condapipe]\ncuda = ["12.8"]\n')
    monkeypatch.chdir(tmp_path)
    assert find_config() == tmp_path / "pyproject.toml"
    assert spec_from_flags("magma", {}).cudas == ("12.8",)


def test_pyproject_without_the_section_is_not_a_config(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.chdir(tmp_path)
    assert find_config() is None and load_config() == {}
    with pytest.raises(UsageError, match=r"has no \[tool.condapipe\] table"):
        load_config(tmp_path / "pyproject.toml")


def test_explicit_config_flag_wins_over_the_local_file(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("other") / "team.toml"
    other.write_text('version = "1.13.1"\npython = "3.10"\ncuda = "11.7"\n')
    s = spec_from_flags("pytorch", {"config": str(other)})
    assert s.version == "1.13.1" and s.cudas == ("11.7",)


def test_upload_settings_for_the_upload_stage(project):
    assert upload_settings() == {"site_url": "https://conda.example.org/api", "channel": "my-org"}
    assert upload_settings(start=project / "checkout") == {}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("cuda = [", "is not valid TOML"),
        ("pythn = '3.10'", "unknown key 'pythn'; valid keys: arch, blas, build_number"),
        ("build_number = 'three'", "build_number must be an integer"),
        ("python = [3.10]", "python must be a string or a list of strings"),
        ("[packages]\nmagma = 1", "[packages.NAME] entries must be tables"),
        ("[packages.magma]\npackage = 'x'", "cannot set 'package'"),
        ("upload = 1", "[upload] must be a table"),
    ],
)
def test_broken_config_files_are_one_line_errors_with_exit_2(tmp_path, monkeypatch, text, fragment):
    (tmp_path / "condapipe.toml").write_text(text + "\n")
    monkeypatch.chdir(tmp_path)
    result = cli("config", "show", "magma", "--cuda", "11.8")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["condapipe.toml"]  # nothing written


def test_missing_config_file_given_by_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("config", "show", "magma", "--cuda", "11.8", "--config", "nope.toml")
    assert result.exit_code == 2 and result.stderr.strip() == "error: config file nope.toml does not exist"

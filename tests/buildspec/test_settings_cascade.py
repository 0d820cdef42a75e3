"""One command's settings: defaults → config file → environment → flags, resolved once and frozen."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from condapipe.buildspec.settings import Settings, resolve_settings, spec_from_settings
from condapipe.errors import UsageError


def write_config(folder: Path, text: str) -> Path:
    path = folder / "condapipe.toml"
    path.write_text(text)
    return path


def test_flags_win_over_the_config_file_and_the_file_over_the_tables(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        'package = "pytorch"\nversion = "2.4.1"\npython = ["3.10", "3.11"]\ncuda = ["cpu"]\n'
        '[env]\nA = "from-file"\nB = "from-file"\n',
    )
    settings = resolve_settings(
        None, {"python": ("3.12",), "env": ("B=from-flag",)}, environ={}, config_path=config
    )
    assert settings.package == "pytorch"
    assert settings.spec["python"] == ("3.12",)
    assert dict(settings.spec["env"]) == {"A": "from-file", "B": "from-flag"}
    assert settings.from_flags == {"python", "env"}
    spec = spec_from_settings(settings)
    assert spec.version == "2.4.1" and spec.pythons == ("3.12",)


def test_the_environment_names_the_users_own_compile_cache(tmp_path: Path) -> None:
    settings = resolve_settings("magma", {}, environ={"CONDAPIPE_COMPILE_CACHE": "/cache"}, config={})
    assert settings.user_compile_cache == "/cache" and settings.compile_cache is None
    flagged = resolve_settings("magma", {"compile_cache": str(tmp_path)}, environ={}, config={})
    assert flagged.compile_cache == str(tmp_path)


def test_the_config_files_compile_cache_is_a_setting_not_a_spec_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, 'compile_cache = "cache"\n')
    settings = resolve_settings("cuda-smoke", {}, environ={}, config_path=config)
    assert settings.compile_cache == str((tmp_path / "cache").resolve())
    assert "compile_cache" not in settings.spec


def test_settings_are_frozen(tmp_path: Path) -> None:
    settings = resolve_settings("cuda-smoke", {"cuda": ("13.0",)}, environ={}, config={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.package = "pytorch"  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.spec["cuda"] = ("12.8",)  # type: ignore[index]


def test_another_package_gets_its_own_overrides_without_reading_the_file_again(tmp_path: Path) -> None:
    config = write_config(tmp_path, 'cuda = ["12.4"]\n[packages.magma]\ncuda = ["12.8"]\n')
    settings = resolve_settings("pytorch", {}, environ={}, config_path=config)
    config.unlink()  # a second read would fail: for_package uses what the cascade already read
    magma = settings.for_package("magma")
    assert isinstance(magma, Settings)
    assert settings.spec["cuda"] == ("12.4",) and magma.spec["cuda"] == ("12.8",)


def test_config_show_prints_the_settings(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from condapipe.cli.main import main

    config = write_config(tmp_path, 'package = "cuda-smoke"\ncuda = ["13.0"]\narch = "9.0"\n')
    result = CliRunner().invoke(main, ["config", "show", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    import json

    shown = json.loads(result.stdout)
    assert shown["settings"]["package"] == "cuda-smoke"
    assert shown["settings"]["config_file"] == str(config.resolve())
    assert shown["settings"]["spec"]["cuda"] == ["13.0"]


def test_the_cuda_axis_is_read_once_by_the_cascade_and_taken_as_it_is_downstream(tmp_path: Path) -> None:
    # "12.4, 12.6" in the config file, repeated and comma-separated flags: one list, X.Y, each once.
    config = write_config(tmp_path, 'cuda = "12.4, 12.6"\n')
    assert resolve_settings("magma", {}, environ={}, config_path=config).spec["cuda"] == ("12.4", "12.6")
    settings = resolve_settings("magma", {"cuda": ("13.0,12.4", "13.0")}, environ={}, config={})
    assert settings.spec["cuda"] == ("13.0", "12.4")
    with pytest.raises(UsageError, match="--cuda 'cu124': write the CUDA version as X"):
        resolve_settings("magma", {"cuda": ("cu124",)}, environ={}, config={})
    with pytest.raises(UsageError, match="unknown CUDA version '12"):
        resolve_settings("magma", {"cuda": ("12.7",)}, environ={}, config={})
    # the spec and a Jetson profile take the cascade's list as it is
    assert spec_from_settings(settings).cudas == ("13.0", "12.4")
    jetson = resolve_settings("pytorch", {"jetson": "orin", "cuda": ("12.6",)}, environ={}, config={})
    assert spec_from_settings(jetson).cudas == ("12.6",)


def test_the_timeouts_are_read_from_the_environment_by_the_cascade() -> None:
    environ = {"CONDAPIPE_CHANNEL_TIMEOUT": "2.5", "CONDAPIPE_UPLOAD_TIMEOUT": "30"}
    settings = resolve_settings("magma", {}, environ=environ, config={})
    assert (settings.channel_timeout, settings.upload_timeout) == (2.5, 30.0)
    assert resolve_settings("magma", {}, environ={}, config={}).channel_timeout is None
    # for_package keeps them without reading the environment again
    assert settings.for_package("pytorch").upload_timeout == 30.0
    for bad in ("inf", "nan", "0", "-1", "1e9", "soon"):
        with pytest.raises(UsageError, match="CONDAPIPE_UPLOAD_TIMEOUT="):
            resolve_settings("magma", {}, environ={"CONDAPIPE_UPLOAD_TIMEOUT": bad}, config={})

"""The optional config file: condapipe.toml, or [tool.condapipe] in pyproject.toml.

Teams keep their usual build matrix (Pythons, CUDAs, archs) and upload site in a file next to
their sources instead of long command lines; CLI flags still override every key. The file is
checked strictly (unknown keys and wrong types are one-line errors naming the file) because a
typo that silently falls back to a default would cost a 9-hour build.

Layout (all keys optional)::

    package = "pytorch"            # default PACKAGE for commands that take one
    version = "2.4.1"              # with `package` set: applies to that package only (as source)
    build_number = 0
    python = ["3.10", "3.11"]     # or one string
    cuda = ["11.8", "12.4"]       # or "cpu"
    cudnn = "9.1.0"
    arch = "8.0;8.6;9.0"
    platform = "linux-64"
    blas = "mkl"
    source = "../pytorch"          # relative to the config file
    jetson = "orin"                # NVIDIA Jetson board profile (condapipe.facts.jetson)
    compile_cache = "redis://cache.example:6379"  # or a directory, or s3://BUCKET/PREFIX
    channels = ["conda-forge", "./deps"]  # dependency channels (replace the default; -c wins)
    [env]                          # extra build environment
    USE_FLASH_ATTENTION = "0"
    [packages.magma]               # overrides for one package
    cuda = ["12.8"]
    [upload]
    site_url = "https://anaconda.example.org/api"
    channel = "my-org"
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from condapipe.errors import UsageError
from condapipe.safe_paths import read_regular_bytes
from condapipe.value_rules import parse_url, refuse_url_credentials

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_NAME = "condapipe.toml"
PYPROJECT = "pyproject.toml"

# key -> (accepted python types, description for errors)
SPEC_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "package": ((str,), "a string"),
    "version": ((str,), "a string"),
    "build_number": ((int,), "an integer"),
    "python": ((str, list), "a string or a list of strings"),
    "cuda": ((str, list), "a string or a list of strings"),
    "cudnn": ((str,), "a string"),
    "arch": ((str, list), "a string or a list of strings"),
    "platform": ((str,), "a string"),
    "blas": ((str,), "a string"),
    "source": ((str,), "a string"),
    "jetson": ((str,), "a string"),
    "env": ((dict,), "a table"),
    "compile_cache": ((str,), "a string (a directory, redis://HOST:PORT or s3://BUCKET/PREFIX)"),
    "channels": ((str, list), "a string or a list of strings (channel names, URLs or directories)"),
}
TABLE_KEYS = ("packages", "upload")
_MAX_CONFIG_BYTES = 4 << 20


def find_config(start: Path | None = None) -> Path | None:
    """condapipe.toml in ``start`` (default: cwd), else a pyproject.toml with [tool.condapipe]."""
    base = start or Path.cwd()
    own = base / CONFIG_NAME
    if own.is_file():
        return own
    pyproject = base / PYPROJECT
    if (
        pyproject.is_file()
        and isinstance(tool := _read_toml(pyproject).get("tool"), dict)
        and "condapipe" in tool
    ):
        return pyproject
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise UsageError(f"config file {path} does not exist")
    if path.is_dir():
        raise UsageError(f"config file {path} is a directory")
    try:
        raw = read_regular_bytes(path, max_bytes=_MAX_CONFIG_BYTES)  # a FIFO or device: refused, not read
        return tomllib.loads(raw.decode("utf-8"))
    except UsageError as exc:
        raise UsageError(f"config file {exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"config file {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"config file {path} is nested too deeply to read") from None


def _check_spec_table(table: dict[str, Any], where: str) -> None:
    for key, value in table.items():
        if key not in SPEC_KEYS:
            raise UsageError(f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(SPEC_KEYS))}")
        types, desc = SPEC_KEYS[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise UsageError(f"{where}: {key} must be {desc}")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise UsageError(f"{where}: {key} must be {desc}")
        if isinstance(value, dict) and not all(isinstance(v, (str, int, float)) for v in value.values()):
            raise UsageError(f"{where}: env values must be strings or numbers")


def load_config(path: Path | None = None, *, start: Path | None = None) -> dict[str, Any]:
    """The config as a dict (empty when there is none), validated, with `source` made absolute.

    ``path`` is --config FILE (must exist); without it the file is looked up in ``start``/cwd.
    The dict has the spec keys at the top level, plus ``packages`` (per-package overrides),
    ``upload`` (read by condapipe.publish.upload via :func:`upload_settings`) and ``_path`` (the file).
    """
    if path is None:
        path = find_config(start)
        if path is None:
            return {}
    path = Path(path)
    data = _read_toml(path)
    if path.name == PYPROJECT:
        tool = data.get("tool")
        if not isinstance(tool, dict) or "condapipe" not in tool:
            raise UsageError(f"{path} has no [tool.condapipe] table")
        data = data["tool"]["condapipe"]
        where = f"{path} [tool.condapipe]"
    else:
        where = str(path)
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected a table")
    spec_part = {k: v for k, v in data.items() if k not in TABLE_KEYS}
    _check_spec_table(spec_part, where)
    packages = data.get("packages", {})
    if not isinstance(packages, dict) or not all(isinstance(v, dict) for v in packages.values()):
        raise UsageError(f"{where}: [packages.NAME] entries must be tables")
    for name, table in packages.items():
        if "package" in table:
            raise UsageError(f"{where}: [packages.{name}] cannot set 'package'")
        _check_spec_table(table, f"{where} [packages.{name}]")
    upload = data.get("upload", {})
    if not isinstance(upload, dict):
        raise UsageError(f"{where}: [upload] must be a table")
    for key, value in upload.items():
        if not isinstance(value, (str, bool, int, list)):
            raise UsageError(f"{where}: upload.{key} has an unsupported type")
        if key in ("site_url", "channel") and (not isinstance(value, str) or not value.strip()):
            raise UsageError(f"{where}: upload.{key} must be a non-empty string")
        if key == "site_url" and isinstance(value, str):  # a secret in it is refused before use
            what = f"{where}: upload.site_url"
            parts = parse_url(value.strip(), what)
            refuse_url_credentials(parts, what, "give the token in $ANACONDA_API_TOKEN or --token-file")
            if parts.scheme not in ("http", "https"):
                raise UsageError(f"{what} must be an http:// or https:// URL")
    config = dict(spec_part)
    config["packages"] = {name: _absolute_source(dict(t), path) for name, t in packages.items()}
    config["upload"] = dict(upload)
    config["_path"] = path.resolve()
    return _absolute_source(config, path)


def _absolute_source(table: dict[str, Any], path: Path) -> dict[str, Any]:
    """A relative `source` or `compile_cache` directory is relative to the config file, not the cwd."""
    src = table.get("source")
    if isinstance(src, str) and "://" not in src and not src.startswith("git+"):
        table["source"] = str((path.resolve().parent / src).resolve())
    channels = table.get("channels")
    if isinstance(channels, (str, list)):
        table["channels"] = [
            _config_relative(c, path) for c in ([channels] if isinstance(channels, str) else channels)
        ]
    cache_dir = table.get("compile_cache")
    if isinstance(cache_dir, str) and cache_dir and "://" not in cache_dir:
        table["compile_cache"] = str((path.resolve().parent / Path(cache_dir).expanduser()).resolve())
    return table


def _config_relative(channel: str, path: Path) -> str:
    """A channel given as a relative directory (./deps) is relative to the config file."""
    if channel.startswith((".", "~")) or ("/" in channel and "://" not in channel):
        return str((path.resolve().parent / Path(channel).expanduser()).resolve())
    return channel


def spec_settings(config: dict[str, Any], package: str) -> dict[str, Any]:
    """The spec keys that apply to ``package``: top level, overridden by [packages.<package>]."""
    merged = {k: v for k, v in config.items() if k in SPEC_KEYS and k != "package"}
    if config.get("package") and config["package"] != package:
        # version and source name one package's upstream; they do not carry over to others
        merged.pop("version", None)
        merged.pop("source", None)
    override = config.get("packages", {}).get(package, {})
    env = {**merged.get("env", {}), **override.get("env", {})}
    merged.update(override)
    if env:
        merged["env"] = env
    return merged


def upload_settings(path: Path | None = None, *, start: Path | None = None) -> dict[str, Any]:
    """The [upload] table (e.g. ``site_url``, ``channel``) of the config file, or {}."""
    return dict(load_config(path, start=start).get("upload", {}))

"""`-m/--variant-config FILE`: a conda-build / rattler-build variant file read as spec flags.

People who build with conda-build keep their matrix in a `conda_build_config.yaml` (`python: [3.10,
3.11]`, `cuda_compiler_version: [12.4]`) and pass it with `-m`. condapipe already takes the same
matrix as repeatable `--python` / `--cuda` (and `--platform`, `--blas`), so the file is translated
into those flags, once, before the settings cascade; an explicit flag still wins. Keys condapipe has
no flag for are refused by name (a silently ignored key would cost a build of the wrong thing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from condapipe.errors import UsageError
from condapipe.safe_paths import read_regular_bytes

# variant key (conda-forge / conda-build spelling) -> condapipe spec key; lists keep every value.
VARIANT_KEYS: dict[str, str] = {
    "python": "python",
    "cuda_compiler_version": "cuda",
    "cuda": "cuda",
    "target_platform": "platform",
    "blas_impl": "blas",
}
_LIST_KEYS = ("python", "cuda")  # spec keys that take several values (one variant each)
# What conda-forge writes for a CPU variant of cuda_compiler_version.
_CPU_WORDS = ("none", "None", "cpu")
_MAX_BYTES = 1 << 20


def _scalars(value: Any, where: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in items):
        raise UsageError(f"{where}: expected a value or a list of values")
    return [str(v) for v in items]


def _load(path: Path) -> Mapping[str, Any]:
    try:
        text = read_regular_bytes(path, max_bytes=_MAX_BYTES).decode("utf-8")
        # every scalar as written: `python: [3.10]` is Python 3.10, not the float 3.1
        data = YAML(typ="base").load(text)
    except UsageError as exc:
        raise UsageError(f"--variant-config {exc}") from None
    except FileNotFoundError:
        raise UsageError(f"--variant-config {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--variant-config {path} is a directory, not a variant file") from None
    except UnicodeDecodeError:
        raise UsageError(f"--variant-config {path} is not UTF-8 text") from None
    except (YAMLError, RecursionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise UsageError(f"--variant-config {path} is not valid YAML: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise UsageError(f"--variant-config {path}: expected a mapping of variant keys")
    return data


def variant_flags(paths: Sequence[Path]) -> dict[str, Any]:
    """The spec flags the variant files give (`python`/`cuda` as tuples, as repeated flags arrive).

    Several files merge in order, a later file's key replacing an earlier one's (conda-build's rule)."""
    flags: dict[str, Any] = {}
    for path in paths:
        for key, value in _load(path).items():
            spec_key = VARIANT_KEYS.get(str(key))
            if spec_key is None:
                known = ", ".join(VARIANT_KEYS)
                raise UsageError(
                    f"--variant-config {path}: key {key!r} has no condapipe equivalent (known: {known}); "
                    "put other build settings in condapipe.toml or --env NAME=VALUE"
                )
            values = _scalars(value, f"--variant-config {path}: {key}")
            if spec_key == "cuda":
                values = ["cpu" if v in _CPU_WORDS else v for v in values]
            if spec_key in _LIST_KEYS:
                flags[spec_key] = tuple(values)
            elif len(values) != 1:
                raise UsageError(f"--variant-config {path}: {key} takes one value, got {len(values)}")
            else:
                flags[spec_key] = values[0]
    return flags

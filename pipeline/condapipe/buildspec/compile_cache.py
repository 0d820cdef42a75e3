"""--compile-cache: a local ccache directory, or a store sccache shares between machines.

What a build gets is environment, never a recipe change: the same recipe builds with or without a
cache, and a cache setting never makes the plan rebuild anything. `CONDAPIPE_COMPILE_CACHE` (passed
to build.sh by value, so it lands in the rendered recipe) holds only a directory or the word
"sccache"; the store itself (endpoint, bucket, credentials) travels in sccache's own variables,
which the recipes pass by name only (data/compile_cache.yaml). Credentials are read from the
environment: a URL with a password on the command line or in the config file is refused.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from condapipe.errors import UsageError
from condapipe.value_rules import parse_url, refuse_url_credentials

CREDENTIALS_FIX = (
    "set SCCACHE_REDIS_PASSWORD (Redis) or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (S3) in the environment"
)

COMPILE_CACHE_ENV = "CONDAPIPE_COMPILE_CACHE"
SCCACHE_MODE = "sccache"


@cache
def _data() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("compile_cache.yaml").read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


def _not_home_or_root(path: Path, home: str | None) -> None:
    """ccache fills its folder with its own tree and trims it to its size: never $HOME or `/`."""
    resolved = path.resolve()
    if resolved == Path("/") or (home and resolved == Path(home).resolve()):
        raise UsageError(
            "--compile-cache: refusing to use the home folder or / as the compile cache "
            "(ccache fills and trims it); name a folder of its own, e.g. ~/.cache/condapipe-ccache"
        )


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def sccache_env_names() -> tuple[str, ...]:
    """The sccache/AWS settings build.sh receives by name (values stay out of recipes and logs)."""
    return tuple(_data()["sccache_env"])


def remote_schemes() -> tuple[str, ...]:
    return tuple(_data()["schemes"])


@dataclass(frozen=True)
class CompileCache:
    """A resolved --compile-cache: what it is (for messages) and the build environment it sets."""

    kind: str  # "directory" or a URL scheme ("redis", "s3")
    display: str  # safe to print: a path, or scheme://host/prefix without credentials
    env: tuple[tuple[str, str], ...]


def resolve_compile_cache(
    value: str, environ: Mapping[str, str], *, base: Path | None = None
) -> CompileCache:
    """`value` (DIR | redis://HOST:PORT[/DB] | s3://BUCKET[/PREFIX] | SCHEME:// with the rest in
    the environment) as the build environment. One-line UsageError for what cannot work."""
    text = value.strip()
    if not text:
        raise UsageError("--compile-cache needs a directory or a URL (redis://HOST:PORT, s3://BUCKET/PREFIX)")
    if "://" not in text:
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if path.exists() and not path.is_dir():
            raise UsageError(f"--compile-cache {_shown(value)}: not a directory")
        _not_home_or_root(path, environ.get("HOME"))
        resolved = str(path.resolve())
        return CompileCache("directory", resolved, ((COMPILE_CACHE_ENV, resolved),))
    scheme = text.split("://", 1)[0].lower()
    rules = _data()["schemes"].get(scheme)
    if rules is None:
        known = ", ".join(f"{s}://" for s in remote_schemes())
        raise UsageError(f"--compile-cache: unsupported store {scheme}:// (use a directory or {known})")
    parts = parse_url(text, "--compile-cache")  # `redis://[::1`, a bad port: one line, not a ValueError
    refuse_url_credentials(parts, "--compile-cache", CREDENTIALS_FIX)
    env: dict[str, str] = {}
    if parts.netloc:
        if "endpoint" in rules:
            env[rules["endpoint"]] = text
        if "bucket" in rules:
            env[rules["bucket"]] = parts.hostname or parts.netloc
            prefix = parts.path.strip("/")
            if prefix:
                env[rules["prefix"]] = prefix
        display = f"{scheme}://{parts.netloc}{parts.path}"
    else:
        needed = rules["from_env"]
        if not environ.get(needed):
            raise UsageError(
                f"--compile-cache {scheme}:// names no store: give {scheme}://... or set {needed}"
            )
        display = f"{scheme}:// (from {needed})"
    # Only names with a value: rattler-build masks every secret's value in its output, and an
    # empty value would mask the empty string between every character of the whole build log.
    full = {name: environ[name] for name in sccache_env_names() if environ.get(name)}
    full.update(env)
    full[COMPILE_CACHE_ENV] = SCCACHE_MODE
    return CompileCache(scheme, display, tuple(sorted(full.items())))


def shared_cache_dir(work_dir: Path) -> str:
    """The cache several Pythons of one build share when the user named none."""
    return str((work_dir / "compile-cache").resolve())


def resume_families() -> tuple[str, ...]:
    """Families whose builds get a kept compile cache by default (data/compile_cache.yaml)."""
    return tuple(_data()["resume_families"])


def recipe_reads_compile_cache(recipe_dir: Path) -> bool:
    """Whether a recipe directory's build passes CONDAPIPE_COMPILE_CACHE on to its script."""
    for name in ("recipe.yaml", "meta.yaml", "build.sh"):
        path = recipe_dir / name
        try:
            if path.is_file() and COMPILE_CACHE_ENV in path.read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:
            continue
    return False


@cache
def ccache_runs() -> bool:
    """Whether a ccache on PATH runs here: the kept cache is chosen only then. A ccache that is on
    PATH but cannot start (Debian's, unpacked without its libhiredis: 'error while loading shared
    libraries', found on the GPU machine) would otherwise fail the build's first compile."""
    found = shutil.which("ccache")
    if found is None:
        return False
    try:
        proc = subprocess.run([found, "--version"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def shared_compile_cache(
    *,
    environ: Mapping[str, str],
    pythons: int,
    work_dir: Path,
    recipe_passes_it: bool,
    ccache_found: bool,
    resumable: bool = False,
) -> CompileCache | None:
    """The cache a build gets when the user named none (--compile-cache or the config file's
    compile_cache, which resolve_compile_cache turns into environment), kept under the work dir
    (needs ccache, and a build.sh that takes the cache):

    - several Pythons of one family share it, so the C++ core is compiled once;
    - a resumable build (a resume family: magma, PyTorch, hours of compiling; a recipe directory
      whose build reads CONDAPIPE_COMPILE_CACHE) always gets it, so a build stopped by
      Ctrl-C, SIGTERM or kill -9 continues on the rerun: every object finished before the stop is
      a cache hit. ccache keys each object by the compiler, its arguments and the preprocessed
      source, so a changed patch, flag or compiler recompiles exactly what it changes.

    A cache the user set in the environment (CONDAPIPE_COMPILE_CACHE) is left alone."""
    if environ.get(COMPILE_CACHE_ENV) or not recipe_passes_it or not ccache_found:
        return None
    if pythons < 2 and not resumable:
        return None
    path = shared_cache_dir(work_dir)
    return CompileCache("directory", path, ((COMPILE_CACHE_ENV, path),))

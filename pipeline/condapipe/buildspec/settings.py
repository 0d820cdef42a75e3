"""One command's settings, resolved once: defaults → config file → environment → flags.

Like cibuildwheel's options cascade, each layer overrides the one before it, and the result is a
frozen object the command passes down: the config file is read once per command, nothing below
the CLI looks at flags, files or the environment for a setting again, and `config show` prints
exactly what a build would use. Flags arrive as a plain mapping (the CLI's own parsing); values are
validated later by condapipe.buildspec.build_spec, so a mistake is a one-line UsageError.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from condapipe.buildspec.build_spec import BuildSpec, build_spec, check_forms, cuda_axis
from condapipe.buildspec.compile_cache import COMPILE_CACHE_ENV
from condapipe.buildspec.config_file import load_config, spec_settings
from condapipe.buildspec.defaults import Choice, FoundToolkit, fill_defaults
from condapipe.errors import UsageError
from condapipe.process_settings import PROCESS_ENVIRONMENT, STAGE_ENVIRONMENT, EnvSetting
from condapipe.value_rules import check_env_entry, parse_url, refuse_url_credentials, without_credentials

# The spec keys a command line can set (flag name with dashes -> this key).
SPEC_FLAG_KEYS = (
    "version",
    "build_number",
    "python",
    "cuda",
    "cudnn",
    "arch",
    "platform",
    "blas",
    "source",
    "env",
    "jetson",
)


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thawed(v) for v in value]
    return value


def parse_env_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """`--env NAME=VALUE` pairs as a dict; a pair without `=` or a name is a UsageError."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env expects NAME=VALUE, not {pair!r}")
        env[name] = value
    return env


def flag_settings(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The spec keys the user gave as flags (absent flags are left out, not None)."""
    out: dict[str, Any] = {}
    for key in SPEC_FLAG_KEYS:
        value = flags.get(key)
        if value is None or value == ():
            continue
        if key == "env":
            out[key] = parse_env_pairs(tuple(value))
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


MAX_TIMEOUT_S = 86_400.0  # a day: longer is a typo (and inf or nan cannot become a timer)
ENVIRONMENT: tuple[EnvSetting, ...] = (
    EnvSetting(
        COMPILE_CACHE_ENV,
        "user_compile_cache",
        "--compile-cache",
        "the user's own compile cache (a ccache dir or sccache store), which build.sh uses as it is",
    ),
    EnvSetting(
        "CONDAPIPE_CHANNEL_TIMEOUT",
        "channel_timeout",
        "-c/--channel",
        "seconds a remote channel may take to answer a probe or an index fetch (default: data/channels.yaml)",
    ),
    EnvSetting(
        "CONDAPIPE_UPLOAD_TIMEOUT",
        "upload_timeout",
        "--channel/--owner (upload)",
        "seconds one anaconda.org request may take (default: the upload library's)",
    ),
    *STAGE_ENVIRONMENT,  # read by a stage from Settings.environ (condapipe.process_settings)
    *PROCESS_ENVIRONMENT,  # what every command of the process shares (condapipe.process_settings)
)


def _seconds(name: str, raw: str | None) -> float | None:
    """A timeout from the environment: None when unset; a UsageError naming the variable when it is
    no finite number of seconds above 0 and at most a day."""
    text = (raw or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UsageError(f"{name}={shown!r}: give a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything one command was asked, after the cascade; frozen and passed down."""

    package: str | None  # PACKAGE from the command line, else `package` from the config file
    spec: Mapping[str, Any]  # the spec keys for `package`: config file, then flags
    from_flags: frozenset[str]  # which spec keys came from flags (they win over table defaults)
    config_file: Path | None
    upload: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # [upload]
    compile_cache: str | None = None  # --compile-cache, else the config file's compile_cache
    user_compile_cache: str | None = None  # CONDAPIPE_COMPILE_CACHE from the environment
    channels: tuple[str, ...] = ()  # the config file's dependency channels (-c replaces them)
    channel_timeout: float | None = None  # CONDAPIPE_CHANNEL_TIMEOUT (None: data/channels.yaml's)
    upload_timeout: float | None = None  # CONDAPIPE_UPLOAD_TIMEOUT (None: the upload library's)
    # The environment the command was started in, whole: doctor checks it (PATH, CC, MAX_JOBS, its
    # CONDAPIPE_* overrides), the compile cache and the upload token are read from it, engines pass
    # it on. It holds secrets (tokens, sccache credentials), so it is never in repr or to_dict.
    environ: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )

    def require_package(self) -> str:
        """The package to work on; a UsageError when neither the command line nor the file names one."""
        if self.package:
            return self.package
        raise UsageError("no package given: name one (e.g. pytorch) or set `package` in condapipe.toml")

    def spec_dict(self) -> dict[str, Any]:
        """The spec keys as plain (mutable) Python values, for build_spec and workflow flags."""
        return _thawed(self.spec)

    def for_package(self, package: str, **flags: Any) -> Settings:
        """The same cascade for another package (the config file's [packages.X] applies), with
        `flags` added; the config file is not read again."""
        merged = {**self._flags, **flags}
        return resolve_settings(package, merged, config=self._config, environ=self.environ)

    def package_source(self, package: str) -> str | None:
        """The source the config file's [packages.<package>] table names (a folder, archive or URL),
        for a package built alongside this one (`--with`), which has no --source of its own."""
        packages = self._config.get("packages")
        table = packages.get(package) if isinstance(packages, Mapping) else None
        source = table.get("source") if isinstance(table, Mapping) else None
        return str(source) if source else None

    def with_source(self, source: str) -> Settings:
        """The same settings with `source` as the source (a folder an archive was unpacked into);
        it counts as given on the command line, so for_package keeps it too."""
        return replace(
            self,
            spec=_frozen({**self.spec_dict(), "source": source}),
            from_flags=self.from_flags | {"source"},
            _flags=MappingProxyType({**self._flags, "source": source}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "config_file": str(self.config_file) if self.config_file else None,
            "spec": self.spec_dict(),
            "from_flags": sorted(self.from_flags),
            "upload": _thawed(self.upload),
            "compile_cache": self.compile_cache,
            "user_compile_cache": without_credentials(self.user_compile_cache),
            "channels": list(self.channels),
        }

    # what the cascade started from, kept so for_package re-resolves without reading the file again
    _flags: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _config: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def resolve_settings(
    package: str | None,
    flags: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    config_path: Path | None = None,
    config: Mapping[str, Any] | None = None,
) -> Settings:
    """The cascade for one command. `flags` maps spec keys (and `compile_cache`) to what the command
    line gave; `config` is an already-read config file (else `config_path` or ./condapipe.toml is read)."""
    if config is None:
        config = load_config(config_path)
    name = package or (str(config["package"]) if config.get("package") else None)
    spec = spec_settings(dict(config), name) if name else {}
    given = flag_settings(flags)
    _refuse_secrets(config, spec, given, flags.get("compile_cache"))
    _refuse_url_secret(
        f"${COMPILE_CACHE_ENV}",
        environ.get(COMPILE_CACHE_ENV),
        "set SCCACHE_REDIS_PASSWORD (Redis) or "
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (S3) in the environment",
    )
    if "env" in given:
        given["env"] = {**spec.get("env", {}), **given["env"]}
    spec.update(given)
    if spec.get("cuda") is not None:  # the CUDA axis is read here, once: every stage takes this list
        spec["cuda"] = cuda_axis(spec["cuda"])
    cache = flags.get("compile_cache") or spec.pop("compile_cache", None)
    spec.pop("compile_cache", None)
    channels = spec.pop("channels", None) or ()
    path = config.get("_path")
    return Settings(
        package=name,
        spec=_frozen(spec),
        from_flags=frozenset(given),
        config_file=Path(path) if path else None,
        upload=_frozen(config.get("upload", {})),
        compile_cache=str(cache) if cache else None,
        user_compile_cache=environ.get(COMPILE_CACHE_ENV) or None,
        channels=tuple(channels),
        channel_timeout=_seconds("CONDAPIPE_CHANNEL_TIMEOUT", environ.get("CONDAPIPE_CHANNEL_TIMEOUT")),
        upload_timeout=_seconds("CONDAPIPE_UPLOAD_TIMEOUT", environ.get("CONDAPIPE_UPLOAD_TIMEOUT")),
        environ=MappingProxyType(dict(environ)),
        _flags=MappingProxyType(dict(flags)),
        _config=MappingProxyType(dict(config)),
    )


def _refuse_secrets(
    config: Mapping[str, Any], spec: Mapping[str, Any], given: Mapping[str, Any], cache_flag: Any
) -> None:
    """Secrets come from the environment or files only: none in [env], --env, or a cache/site URL."""
    where = f"[env] in {config.get('_path') or 'the config file'}"
    packages = config.get("packages")
    per_package = (
        [p.get("env") for p in packages.values() if isinstance(p, Mapping)]
        if isinstance(packages, Mapping)
        else []
    )
    sources = [(where, spec.get("env")), (where, config.get("env")), *((where, e) for e in per_package)]
    for origin, values in (*sources, ("--env", given.get("env"))):
        if isinstance(values, Mapping):
            for name, value in values.items():
                check_env_entry(str(name), str(value), origin)
    fixes = {
        "compile_cache": "set SCCACHE_REDIS_PASSWORD (Redis) or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (S3)",
        "site_url": "give the token in $ANACONDA_API_TOKEN or --token-file",
    }
    upload = config.get("upload")
    urls = [
        ("--compile-cache", cache_flag, fixes["compile_cache"]),
        ("compile_cache in the config file", spec.get("compile_cache"), fixes["compile_cache"]),
        (
            "upload.site_url in the config file",
            upload.get("site_url") if isinstance(upload, Mapping) else None,
            fixes["site_url"],
        ),
    ]
    for what, value, fix in urls:
        _refuse_url_secret(what, value, fix)


def _refuse_url_secret(what: str, value: Any, fix: str) -> None:
    if isinstance(value, str) and "://" in value:
        refuse_url_credentials(parse_url(value, what), what, fix)


def spec_from_settings(settings: Settings) -> BuildSpec:
    """The BuildSpec of the settings' package, exactly as flags and config file give it (render)."""
    return build_spec(settings.require_package(), settings.spec_dict(), from_cli=settings.from_flags)


def spec_with_defaults(
    settings: Settings,
    *,
    toolkits: Callable[[], Sequence[FoundToolkit]],
    python: str | None = None,
    command: str | None = None,
    companions: Sequence[str] = (),
) -> tuple[BuildSpec, tuple[Choice, ...]]:
    """Like spec_from_settings, with what flags and config file leave open filled in from the tables
    and the machine (condapipe.buildspec.defaults): the BuildSpec and every choice made (version,
    Python, CUDA, then the archs, cuDNN, JetPack and --with pair read off the spec)."""
    from condapipe.buildspec.spec_choices import spec_choices

    package = settings.require_package()
    given = settings.spec_dict()
    check_forms(given)  # a malformed value is refused, never replaced by a default
    spec, choices = fill_defaults(
        package, given, toolkits=toolkits, python=python, command=command, companions=companions
    )
    built = build_spec(package, spec, from_cli=settings.from_flags)
    return built, (*choices, *spec_choices(built, given, companions))


def spec_from_flags(package: str, flags: Mapping[str, Any]) -> BuildSpec:
    """The BuildSpec a command line gives (`config` in `flags`: the config file to read), for the
    Python API and tests; the CLI resolves its Settings once instead."""
    config = flags.get("config")
    settings = resolve_settings(package, flags, environ={}, config_path=Path(config) if config else None)
    return spec_from_settings(settings)

"""`condapipe build PACKAGE|RECIPE_DIR`: build a package family through the plan, or a recipe dir.

A family name (pytorch, magma, cuda-smoke, ...) goes doctor -> resumable plan (prerequisites,
render -> engine -> fix -> verify -> test -> publish per variant; condapipe.cli.family_build); a directory the
user wrote (meta.yaml and/or recipe.yaml) goes through the same engine -> fix -> verify -> test ->
publish plan (condapipe.cli.recipe_build), so the tool is useful for any recipe and the channel
never holds an unverified package. Packages land in --output-dir, which is kept a valid local channel.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from condapipe.buildspec.settings import Settings
from condapipe.cli.flags import (
    compile_cache_option,
    dependency_channels_option,
    dry_run_option,
    engine_option,
    force_option,
    json_option,
    no_test_option,
    offline_option,
    output_dir_option,
    settings_from_flags,
    spec_options,
    with_option,
    work_dir_option,
)
from condapipe.cli.output import echo_lines
from condapipe.engines import (
    recipe_formats,
)
from condapipe.engines.base import PACKAGE_FORMATS
from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.plan.build_channels import ChannelSetup
from condapipe.value_rules import check_channel

# Spec flags that mean something for a recipe directory; the rest describe a family build.
_DIR_FLAGS = ("python", "platform", "env")


def _given(value: Any) -> bool:
    return value not in (None, (), [], "", False)


def _recipe_dir_target(target: str) -> Path | None:
    """`target` as a recipe directory, or None when it names a package family."""
    path = Path(target)
    if path.is_dir() and recipe_formats(path):
        return path
    if path.is_dir() or "/" in target or target in (".", ".."):
        if not path.is_dir():
            raise UsageError(f"{target}: no such directory")
        raise UsageError(f"{target} holds neither meta.yaml nor recipe.yaml")
    return None


def _tool_channel(work_dir: Path, dry_run: bool) -> str:
    """`--build-tools wheels`: cmake and ninja from this Python's wheels as a local channel (offline)."""
    from condapipe.cli.output import err_console
    from condapipe.inputchannels.tool_channel import TOOLS, default_sources, make_tool_channel

    channel = (work_dir / "tool-channel").absolute()
    if not dry_run:
        try:
            made = make_tool_channel(channel, default_sources(TOOLS))
        except OSError as exc:  # one line with the path and the fix, not Python's errno text
            raise EnvironmentProblem(
                f"cannot write the build-tool channel {channel}: {exc.strerror or exc}",
                "choose a --work-dir you can write to",
            ) from None
        err_console.print(f"build tools from wheels: {', '.join(p.name for p in made)} in {channel}")
    return str(channel)


def _channel_setup(
    given: tuple[str, ...], output_dir: Path, work_dir: Path, build_tools: str, offline: bool, dry_run: bool
) -> ChannelSetup:
    """The build's channels (condapipe.plan.build_channels: defaults, -c, config, --offline), each probed."""
    from condapipe.plan.build_channels import prepare_channels

    tool = _tool_channel(work_dir, dry_run) if build_tools == "wheels" else None
    planned: tuple[tuple[str, str], ...] = ()
    if tool and dry_run:  # a tool the real run cannot lay out stops the dry run the same way
        from condapipe.inputchannels.tool_channel import TOOLS, from_installed, installed_versions

        planned = tuple(installed_versions(TOOLS).items())
        for name in sorted(set(TOOLS) - {n for n, _ in planned}):
            from_installed(name)  # raises: not installed next to condapipe, with the pip fix
    return prepare_channels(output_dir, given, tool_channel=tool, offline=offline, planned_tools=planned)


def _explicit_compile_cache(settings: Settings) -> tuple[tuple[str, str], ...]:
    """--compile-cache (else the config file's compile_cache) as build environment; () for none."""
    if not settings.compile_cache:
        return ()
    from condapipe.buildspec.compile_cache import resolve_compile_cache
    from condapipe.cli.output import err_console

    cache = resolve_compile_cache(settings.compile_cache, settings.environ)
    err_console.print(f"compile cache: {cache.display}", soft_wrap=True, markup=False, highlight=False)
    return cache.env


def _recipe_dir_cache(recipe_dir: Path, work_dir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """A recipe directory that passes CONDAPIPE_COMPILE_CACHE to its script gets the work dir's
    kept cache (when ccache is on PATH), as magma and PyTorch do: an interrupted build continues.
    `environ` is the command's (Settings.environ): a cache the user set there is theirs."""

    from condapipe.buildspec.compile_cache import (
        ccache_runs,
        recipe_reads_compile_cache,
        shared_compile_cache,
    )

    cache = shared_compile_cache(
        environ=environ,
        pythons=1,
        work_dir=work_dir,
        recipe_passes_it=recipe_reads_compile_cache(recipe_dir),
        ccache_found=ccache_runs(),
        resumable=True,
    )
    if cache is None:
        return {}
    return dict(cache.env)


def _say_kept_cache(env: dict[str, str], environ: Mapping[str, str]) -> None:
    """One line when condapipe chose the compile cache itself: where it is and how it goes."""
    from condapipe.buildspec.compile_cache import COMPILE_CACHE_ENV
    from condapipe.cli.output import err_console

    where = env.get(COMPILE_CACHE_ENV)
    if where and where != "sccache" and COMPILE_CACHE_ENV not in environ:
        err_console.print(
            f"compile cache: {where} (kept: a rerun after an interruption reuses every finished "
            "object; `condapipe clean --caches` removes it)",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )


@click.command("build")
@click.argument("target", metavar="[PACKAGE|RECIPE_DIR]", required=False)
@spec_options
@engine_option(
    "auto: conda-build when `conda build` (or `conda-build`) runs here, else rattler-build; "
    "a recipe dir with one format gets the engine that reads it."
)
@output_dir_option("Local channel the packages go into (also the first channel searched).")
@work_dir_option("Rendered recipes, engine scratch space and build logs.")
@dependency_channels_option(
    "Channel searched for build dependencies (name, URL or directory), as `conda build -c`; repeatable. "
    "Replaces the "
    "default (conda-forge; config key channels); the output dir and the tool channel are always "
    "searched. Not an upload destination: that is `condapipe upload --channel/--owner ORG`."
)
@click.option("--override-channels", is_flag=True, help="Search only the output dir and the -c channels.")
@offline_option("Search local channels only (the output dir, -c directories, the tool channel); no network.")
@click.option(
    "--build-tools",
    type=click.Choice(("channels", "wheels")),
    default="channels",
    show_default=True,
    help="Where recipes' build tools (cmake, ninja) come from: the channels in use, or (offline) a local "
    "tool channel condapipe makes in the work dir from the cmake/ninja wheels pip installed next to it.",
)
@click.option("--package-format", type=click.Choice(PACKAGE_FORMATS), default="conda", show_default=True)
@click.option("--compression-level", type=int, help="zstd level 1-22 for .conda, bzip2 1-9 for .tar.bz2.")
@no_test_option("Skip the recipe's tests.")
@click.option(
    "--pack-from-stage",
    is_flag=True,
    help="Experimental (issue 35; rattler-build, recipes whose script ends with the staged fix): the "
    "engine packs only its metadata and condapipe writes the payload in one streaming pass.",
)
@force_option("Build even when `condapipe doctor` finds a blocking problem.")
@compile_cache_option(
    "Compile cache: a local ccache directory, or a store sccache shares between machines "
    "(credentials and endpoints from SCCACHE_*/AWS_* variables, never here). Config key compile_cache."
)
@click.option(
    "--variant",
    metavar="ID",
    help="Build only this variant of the plan (IDs: `condapipe plan PACKAGE …`); its prerequisites "
    "must be in a channel in use (-c), as in the CI jobs `condapipe plan --emit` writes.",
)
@with_option
@dry_run_option
@json_option
def command(
    target: str | None,
    engine: str,
    output_dir: Path,
    work_dir: Path,
    channels: tuple[str, ...],
    override_channels: bool,
    offline: bool,
    build_tools: str,
    package_format: str,
    compression_level: int | None,
    no_test: bool,
    pack_from_stage: bool,
    force: bool,
    compile_cache: str | None,
    variant: str | None,
    companions: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
    **spec_params: Any,
) -> None:
    """Build a package family (cuda-smoke, magma, pytorch, ...) or a recipe directory.

    PACKAGE may come from the config file instead (`package = "pytorch"` in condapipe.toml).
    """
    if compression_level is not None:  # refused before anything is written
        low, high = (1, 22) if package_format == "conda" else (1, 9)
        if not low <= compression_level <= high:
            kind = "zstd" if package_format == "conda" else "bzip2"
            raise UsageError(
                f"--compression-level {compression_level}: {kind} levels for --package-format "
                f"{package_format} are {low}-{high}"
            )
    for chan in channels:
        check_channel(chan, "-c/--channel")
    recipe_dir = _recipe_dir_target(target) if target else None
    # A recipe directory's -m files go to the engine as they are (conda-build -m, rattler-build
    # --variant-config), read with the recipe's own variant file; a family's become spec flags.
    variant_files = (
        tuple(Path(f) for f in spec_params.pop("variant_config", None) or ()) if recipe_dir else ()
    )
    for variant_file in variant_files:
        if not variant_file.is_file():
            raise UsageError(f"-m/--variant-config {variant_file}: no such file")
    settings = settings_from_flags(target, spec_params, compile_cache=compile_cache)  # once per command
    target = settings.require_package()  # the command line's, else the config file's `package`
    cache_env = _explicit_compile_cache(settings)
    from condapipe.plan import PlanOptions

    def plan_options(env: dict[str, str], setup: ChannelSetup) -> PlanOptions:
        """Families and recipe directories run the same plan: build -> fix -> verify -> test -> publish."""
        return PlanOptions(
            output_dir=output_dir.absolute(),
            work_dir=work_dir.absolute(),
            engine=engine,
            channels=setup.channels,
            unreachable=setup.unreachable,
            override_channels=override_channels,
            package_format=package_format,
            compression_level=compression_level,
            run_tests=not no_test,
            pack_from_stage=pack_from_stage,
            env=tuple(sorted(env.items())),
            echo=echo_lines(),
        )

    if recipe_dir is None:  # a package family: doctor, then the resumable plan (condapipe.cli.family_build)
        from condapipe.cli.family_build import FamilyBuild, build_family, preflight
        from condapipe.cli.source_input import archive_source, unpacked_source
        from condapipe.cli.spec_input import doctor_command, machine_spec

        spec, choices = machine_spec(settings, work_dir=work_dir, companions=companions)
        # a companion's own source, where the config file names one ([packages.torchvision] source)
        sources = {f: src for f in companions if (src := settings.package_source(f))}
        if variant is not None:  # an unknown ID is refused before doctor runs
            from condapipe.plan.build_plan import family_jobs, select_variant

            select_variant(family_jobs(spec, companions, sources), variant)
        elif companions:
            # an unknown or unrelated family (or its missing source) is refused before doctor runs
            from condapipe.plan.build_plan import family_jobs

            family_jobs(spec, companions, sources)
        if not dry_run and archive_source(settings) is not None:  # the engine gets a safely unpacked folder
            settings = unpacked_source(settings, work_dir)
            spec, _ = machine_spec(settings, work_dir=work_dir, quiet=True, companions=companions)
        # channels (and the --build-tools wheels tool channel) only once the package and variant are valid
        given = channels or settings.channels
        setup = _channel_setup(given, output_dir, work_dir, build_tools, offline, dry_run)
        checked = preflight(
            spec,
            work_dir=work_dir.absolute(),
            output_dir=output_dir.absolute(),
            engine=engine,
            env=dict(cache_env),
            environ=settings.environ,
        )
        if not cache_env:
            _say_kept_cache(dict(checked.env), settings.environ)
        build_family(
            FamilyBuild(
                checked.spec,
                plan_options(dict(checked.env), setup),
                checked.doctor,
                force=force,
                dry_run=dry_run,
                as_json=as_json,
                variant=variant,
                channels=setup,
                doctor_command=doctor_command(
                    settings, choices, work_dir=work_dir, output_dir=output_dir, engine=engine
                ),
                companions=companions,
                companion_sources=sources,
                offline=offline,
            )
        )
        return
    if companions:
        raise UsageError(f"--with only applies to package families, not to the recipe directory {target}")
    if variant is not None:
        raise UsageError(f"--variant only applies to package families, not to the recipe directory {target}")
    extra = sorted(k for k, v in spec_params.items() if _given(v) and k not in _DIR_FLAGS)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise UsageError(f"{flags} only apply to package families, not to the recipe directory {target}")
    from condapipe.cli.recipe_build import RecipeBuild, build_recipe_dir

    setup = _channel_setup(channels or settings.channels, output_dir, work_dir, build_tools, offline, dry_run)
    # What applies to a recipe dir comes from the settings, config file included (python, platform,
    # env); a family's env goes into its recipe, a recipe directory gets it as build environment.
    dir_spec = settings.spec_dict()
    pythons = dir_spec.get("python") or ()
    env = dict(cache_env)
    if not cache_env:
        env.update(_recipe_dir_cache(recipe_dir, work_dir.absolute(), settings.environ))
        _say_kept_cache(env, settings.environ)
    request = RecipeBuild(
        target,
        recipe_dir,
        plan_options(env, setup),
        pythons=(pythons,) if isinstance(pythons, str) else tuple(str(p) for p in pythons),
        platform=dir_spec.get("platform") or None,
        env=tuple(sorted((str(k), str(v)) for k, v in (dir_spec.get("env") or {}).items())),
        variant_files=tuple(f.resolve() for f in variant_files),
        dry_run=dry_run,
        as_json=as_json,
        channels=setup,
    )
    build_recipe_dir(request)

"""rattler-build engine: builds v1 recipes through py-rattler-build's Python API, in a child process.

It is the engine for machines without conda (pip installs it) and the one CI uses: it builds
offline from local channels, relinks rpaths itself and runs the recipe's tests in a fresh
environment. Packages are built in a fresh scratch folder under the work directory and then moved
into the output folder; publishing them into a channel (and indexing it) is the publish stage's job.

py-rattler-build runs in a fresh interpreter of its own (condapipe.engines.rattler_build_child,
followed by condapipe.engines.engine_process): condapipe keeps none of its memory for the steps
after the build and reports a crash of it as a failed build.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import time
from pathlib import Path
from typing import Any

from condapipe.engines import diagnose, engine_process
from condapipe.engines.base import V1_RECIPE, BuildOptions, EngineResult, log_file_for
from condapipe.engines.logs import BuildLog
from condapipe.engines.recipe_variants import recipe_variant_file
from condapipe.errors import BuildFailed, UsageError
from condapipe.package import pass_record, tree_record

_CHILD = "condapipe.engines.rattler_build_child"
_PACKAGE_SUFFIXES = (".conda", ".tar.bz2")

# rattler-build spells the bzip2 format "tar-bz2" in its format:level strings.
_FORMAT_NAMES = {"conda": "conda", "tar.bz2": "tar-bz2"}


def package_format_arg(options: BuildOptions) -> str:
    """The `format[:level]` string rattler-build takes for --package-format."""
    name = _FORMAT_NAMES[options.package_format]
    return name if options.compression_level is None else f"{name}:{options.compression_level}"


def _collect(packages: list[Path], output_dir: Path) -> list[Path]:
    """Move built packages from the scratch folder to `output_dir/<subdir>/` (the engine's output)."""
    collected = []
    for pkg in packages:
        dest = output_dir / pkg.parent.name / pkg.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(pkg, dest)
        pass_record.move_with(pkg, dest)  # --pack-from-stage's record of what its pass computed
        tree_record.move_with(pkg, dest)  # and the payload it packed, kept as the package's tree
        collected.append(dest)
    return collected


class RattlerBuildEngine:
    """Builds `recipe.yaml` (+ `variants.yaml`) with py-rattler-build."""

    name = "rattler-build"
    recipe_file = V1_RECIPE

    def available(self) -> bool:
        """Whether py-rattler-build is installed (found, not imported: it runs in its own process)."""
        return importlib.util.find_spec("rattler_build") is not None

    def scratch_dir(self, options: BuildOptions, name: str) -> Path:
        """rattler-build's output folder (bld/, test/, its repodata) for `name`, emptied first.

        Emptied because rattler-build also solves against its own output folder: stale packages
        must not satisfy dependencies the output channel lacks. The path is stable (no random or
        time-stamped part, and `no_build_id` below) so that a shared compile cache (sccache) hits
        for CUDA objects too: nvcc embeds the source path in its device passes, so only a build
        under the same path on another machine (CI runners check out to one path) can reuse them.
        A plan holds the work-dir lock while it builds, so no two builds share the folder at once.
        """
        scratch = options.work_dir.resolve() / "rattler-build" / name
        if scratch.is_symlink() or scratch.is_file():
            scratch.unlink()
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        return scratch

    def channels(self, options: BuildOptions) -> list[str]:
        """The output folder first, then the caller's; nothing implicit (conda-forge) is added.

        rattler-build also searches its own scratch output folder on its own. Every local channel
        must already be indexed (condapipe.publish.local_channel.ensure_channel): rattler-build skips an
        unindexed one while solving, and its test step then fails with a bare "Test failed".
        """
        return list(options.all_channels())

    def describe(self, recipe_dir: Path, options: BuildOptions) -> list[str]:
        variants = recipe_variant_file(recipe_dir)
        return [
            f"rattler-build: build {recipe_dir / V1_RECIPE}"
            + (f" with variants {variants}" if variants else "")
            + "".join(f", -m {f}" for f in options.variant_files),
            f"channels: {', '.join(self.channels(options))}",
            f"package format: {package_format_arg(options)}"
            + (f", {options.compression_threads} compression threads" if options.compression_threads else ""),
            f"tests: {'run in a fresh environment' if engine_tests(options) else 'skipped'}",
            *(
                ["packing: the engine its metadata, condapipe the staged payload (--pack-from-stage)"]
                if options.pack_from_stage
                else []
            ),
            f"packages into: {options.output_dir}",
        ]

    def build(self, recipe_dir: Path, options: BuildOptions) -> EngineResult:
        recipe_path = recipe_dir / V1_RECIPE
        if not recipe_path.is_file():
            raise UsageError(f"{recipe_dir} has no {V1_RECIPE}; rattler-build builds v1 recipes")
        variants = recipe_variant_file(recipe_dir)
        scratch = self.scratch_dir(options, recipe_dir.resolve().name)
        stage = None
        if options.pack_from_stage:  # the staged fix moves the payload there (condapipe.fix.stage_out)
            from condapipe.package.stage_layout import REQUEST, STAGE_DIR

            stage = scratch / STAGE_DIR
            stage.mkdir()
            (stage / REQUEST).touch()
        request = {
            "recipe": str(recipe_path.resolve()),
            "shown_recipe": str(recipe_path),
            "variants": str(variants.resolve()) if variants else None,
            "variant_files": [str(f) for f in options.variant_files],
            "pythons": list(options.pythons),
            "target_platform": options.target_platform,
            "run_tests": engine_tests(options),
            "output_dir": str(scratch),
            "channels": self.channels(options),
            "package_format": package_format_arg(options),
            "compression_threads": options.compression_threads,
        }
        log_path = log_file_for(options, recipe_dir.resolve().name, self.name)
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            logs: list[BuildLog] = []

            def write(text: str, style: str | None = None) -> None:
                """Into the build log, opened at the first line (an unreadable recipe leaves none)."""
                if not logs:
                    opened = BuildLog(log_path, echo=options.echo, opened=options.log_opened)
                    logs.append(stack.enter_context(opened))
                logs[0].write(text, style=style)

            def on_message(message: dict[str, Any]) -> None:
                if message["event"] == "started":
                    write(
                        f"condapipe: rattler-build {message.get('version')} building {recipe_path} "
                        f"(package format {package_format_arg(options)}, "
                        f"compression threads {options.compression_threads or 'default'})"
                    )
                elif message["event"] == "log":
                    style = message.get("style")
                    write(str(message.get("text", "")), style if isinstance(style, str) else None)

            try:
                ending = engine_process.run(
                    # the process boundary: the child inherits this environment plus the build's
                    _CHILD,
                    request,
                    {**os.environ, **dict(options.env)},
                    on_message,
                    write,
                )
            except KeyboardInterrupt:  # stopped by the user: nothing to debug, the rerun starts afresh
                shutil.rmtree(scratch, ignore_errors=True)
                raise
            if ending.stopped:
                shutil.rmtree(scratch, ignore_errors=True)
            died = ending.died_how()
            message = str(ending.fields.get("message") or "")
            if died is not None:
                write(f"condapipe: the rattler-build process {died}", style="red")
            elif ending.event == "failed":
                write(f"condapipe: rattler-build failed: {message}", style="red")
            elif ending.event == "error":
                write(f"condapipe: the rattler-build process failed: {message}", style="red")
            log_path = logs[0].path if logs else log_path
        if died is not None:
            raise BuildFailed(
                f"rattler-build crashed while building {recipe_dir}: its process {died}",
                log_path=str(log_path) if logs else None,
            )
        if ending.event == "usage":
            shutil.rmtree(scratch, ignore_errors=True)
            raise UsageError(message.splitlines()[0] if message else f"cannot parse {recipe_path}")
        if ending.event == "error":
            where = str(log_path) if logs else None
            raise BuildFailed(f"rattler-build failed to build {recipe_dir}: {message}", log_path=where)
        if ending.event == "failed":
            found = diagnose.diagnose_file(log_path)
            raise BuildFailed(
                f"rattler-build failed to build {recipe_dir}: {_first_line(message)}",
                diagnosis=diagnose.summary(found),
                log_path=str(log_path),
            )
        built = built_packages(ending.fields.get("packages"), scratch, log_path)
        skipped = ending.fields.get("skipped") or []
        skipped = tuple(str(s) for s in skipped) if isinstance(skipped, list) else ()
        if not built and not skipped:
            raise BuildFailed(f"rattler-build built nothing for {recipe_dir}", log_path=str(log_path))
        if stage is not None:
            built = pack_staged_payload(built, stage, options, log_path)
        packages = _collect(built, options.output_dir)
        shutil.rmtree(scratch, ignore_errors=True)  # kept only after a failure, for debugging
        return EngineResult(self.name, tuple(packages), log_path, time.monotonic() - started, skipped)


def engine_tests(options: BuildOptions) -> bool:
    """Whether the engine runs the recipe's tests: not with --pack-from-stage, whose engine package
    holds no payload (the plan's test step tests the package condapipe completed)."""
    return options.run_tests and not options.pack_from_stage


def pack_staged_payload(built: list[Path], stage: Path, options: BuildOptions, log_path: Path) -> list[Path]:
    """Complete the engine's info-only package with the staged payload (condapipe.package.stage_pack)."""
    from condapipe.package.io import DEFAULT_ZSTD_LEVEL, PackOptions
    from condapipe.package.stage_layout import PREFIX_FILE
    from condapipe.package.stage_pack import pack_from_stage

    if not (stage / PREFIX_FILE).is_file():  # the recipe's script ran no staged fix: the engine packed it all
        return built
    if len(built) != 1 or not built[0].name.endswith(".conda"):
        raise BuildFailed("pack_from_stage packs one .conda per build", log_path=str(log_path))
    pack = PackOptions(zstd_level=options.compression_level or DEFAULT_ZSTD_LEVEL)
    started = time.monotonic()
    # the info records never name the work dir; the packed payload kept as the package's tree
    # when the caller's verify reads it (the plan's: condapipe.package.tree_record)
    pack_from_stage(built[0], stage, pack, records_work_dir=options.work_dir, keep_tree=options.keep_tree)
    with log_path.open("a", encoding="utf-8") as log:  # after the engine's own lines
        log.write(
            f"condapipe: packed the staged payload into {built[0].name} "
            f"in {time.monotonic() - started:.1f} s "
            f"(zstd {pack.zstd_level}, {pack.zstd_threads()} threads)\n"
        )
    return built


def built_packages(reported: object, scratch: Path, log_path: Path) -> list[Path]:
    """The package paths the engine's process reported, each checked to be a package file directly
    in a subdir folder of `scratch` (nothing else is moved into the output folder)."""
    if not isinstance(reported, list):
        raise BuildFailed("the rattler-build process reported no package list", log_path=str(log_path))
    root = scratch.resolve()
    packages = []
    for item in reported:
        path = Path(item) if isinstance(item, str) else None
        if (
            path is None
            or not path.is_absolute()
            or path.resolve() != path
            or path.parent.parent != root
            or not path.name.endswith(_PACKAGE_SUFFIXES)
            or path.is_symlink()
            or not path.is_file()
        ):
            raise BuildFailed(
                f"the rattler-build process reported {item!r}, not a package file in {root}",
                log_path=str(log_path),
            )
        packages.append(path)
    return packages


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else "error"

"""rattler-build engine: builds v1 recipes in-process through py-rattler-build's Python API.

It is the engine for machines without conda (pip installs it) and the one CI uses: it builds
offline from local channels, relinks rpaths itself and runs the recipe's tests in a fresh
environment. Packages are built in a fresh scratch folder under the work directory and then moved
into the output folder; publishing them into a channel (and indexing it) is the publish stage's job.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from condapipe.engines import diagnose
from condapipe.engines.base import V1_RECIPE, BuildOptions, EngineResult, log_file_for
from condapipe.engines.logs import BuildLog
from condapipe.errors import BuildFailed, UsageError

# rattler-build spells the bzip2 format "tar-bz2" in its format:level strings.
_FORMAT_NAMES = {"conda": "conda", "tar.bz2": "tar-bz2"}


class _LogForwarder:
    """py-rattler-build progress callback that streams every log event into a BuildLog."""

    def __init__(self, log: BuildLog) -> None:
        self.log = log

    def on_log(self, event: object) -> None:
        level = getattr(event, "level", "info")
        style = {"error": "red", "warn": "yellow"}.get(level)
        self.log.write(str(getattr(event, "message", "")), style=style)

    def on_build_step(self, event: object) -> None:
        self.log.write(f"== {getattr(event, 'step_name', '')}: {getattr(event, 'message', '')}", style="bold")

    def on_download_start(self, event: object) -> None:
        self.log.write(f"download {getattr(event, 'url', '')}")

    def on_download_progress(self, event: object) -> None:
        return None

    def on_download_complete(self, event: object) -> None:
        return None


@contextmanager
def environment(env: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """Set `env` in this process while rattler-build (in-process) renders and builds.

    Recipes read user settings such as MAX_JOBS through `env.get(...)` at render time.
    """
    saved = {name: os.environ.get(name) for name, _ in env}
    os.environ.update(dict(env))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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
        collected.append(dest)
    return collected


class RattlerBuildEngine:
    """Builds `recipe.yaml` (+ `variants.yaml`) with py-rattler-build."""

    name = "rattler-build"
    recipe_file = V1_RECIPE

    def available(self) -> bool:
        try:
            import rattler_build  # noqa: F401
        except ImportError:
            return False
        return True

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
        must already be indexed (condapipe.publish.channel.ensure_channel): rattler-build skips an
        unindexed one while solving, and its test step then fails with a bare "Test failed".
        """
        return list(options.all_channels())

    def describe(self, recipe_dir: Path, options: BuildOptions) -> list[str]:
        variants = recipe_dir / "variants.yaml"
        return [
            f"rattler-build: build {recipe_dir / V1_RECIPE}"
            + (f" with variants {variants}" if variants.exists() else ""),
            f"channels: {', '.join(self.channels(options))}",
            f"package format: {package_format_arg(options)}",
            f"tests: {'run in a fresh environment' if options.run_tests else 'skipped'}",
            f"packages into: {options.output_dir}",
        ]

    def build(self, recipe_dir: Path, options: BuildOptions) -> EngineResult:
        import rattler_build as rb

        recipe_path = recipe_dir / V1_RECIPE
        if not recipe_path.is_file():
            raise UsageError(f"{recipe_dir} has no {V1_RECIPE}; rattler-build builds v1 recipes")
        try:
            recipe = rb.Stage0Recipe.from_file(recipe_path)
        except rb.RattlerBuildError as exc:
            raise UsageError(f"cannot parse {recipe_path}: {_first_line(exc)}") from exc

        variant_config = rb.VariantConfig()
        if (recipe_dir / "variants.yaml").exists():
            variant_config = rb.VariantConfig.from_file(recipe_dir / "variants.yaml")
        if options.pythons:
            variant_config = variant_config.merge(rb.VariantConfig({"python": list(options.pythons)}))
        render_config = None
        if options.target_platform:
            platform = rb.PlatformConfig(target_platform=options.target_platform)
            render_config = rb.RenderConfig(platform=platform)

        scratch = self.scratch_dir(options, recipe_dir.resolve().name)
        tool_config = rb.ToolConfiguration(test_strategy="native" if options.run_tests else "skip")
        log_path = log_file_for(options, recipe_dir.resolve().name, self.name)
        started = time.monotonic()
        built: list[Path] = []
        with BuildLog(log_path, echo=options.echo) as log:
            log.write(
                f"condapipe: rattler-build {rb.rattler_build_version()} building {recipe_path} "
                f"(package format {package_format_arg(options)})"
            )
            failure: Exception | None = None
            try:
                with environment(options.env):
                    for variant in recipe.render(variant_config, render_config):
                        result = variant.run_build(
                            tool_config=tool_config,
                            output_dir=scratch,
                            channels=self.channels(options),
                            progress_callback=_LogForwarder(log),
                            package_format=package_format_arg(options),
                            no_build_id=True,
                        )
                        built.extend(Path(p) for p in result.packages)
            except rb.RattlerBuildError as exc:
                log.write(f"condapipe: rattler-build failed: {exc}", style="red")
                failure = exc
            log_path = log.path
        if failure is not None:
            found = diagnose.diagnose_file(log_path)
            raise BuildFailed(
                f"rattler-build failed to build {recipe_dir}: {_first_line(failure)}",
                diagnosis=diagnose.summary(found),
                log_path=str(log_path),
            )
        if not built:
            raise BuildFailed(
                f"rattler-build built nothing for {recipe_dir} (every output skipped?)",
                log_path=str(log_path),
            )
        packages = _collect(built, options.output_dir)
        shutil.rmtree(scratch, ignore_errors=True)  # kept only after a failure, for debugging
        return EngineResult(self.name, tuple(packages), log_path, time.monotonic() - started)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

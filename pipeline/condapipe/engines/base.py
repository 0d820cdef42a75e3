"""The Engine protocol and the options every engine honours.

condapipe drives two builders (conda-build and rattler-build) with one set of options so that a
recipe rendered from one model builds the same way whichever engine the machine has.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from condapipe.engines.logs import LineSink
from condapipe.errors import UsageError

PACKAGE_FORMATS = ("conda", "tar.bz2")
# zstd levels accepted by both engines for .conda, bzip2 levels for .tar.bz2.
COMPRESSION_RANGES = {"conda": (1, 22), "tar.bz2": (1, 9)}

V0_RECIPE = "meta.yaml"
V1_RECIPE = "recipe.yaml"


@dataclass(frozen=True)
class BuildOptions:
    """What the user asked of a build, independent of the engine that runs it.

    Engines only build: they leave the packages in `output_dir/<subdir>/` and never index or
    publish. Every local channel they search (`all_channels()`) must already be indexed; callers
    prepare them and publish the result with condapipe.publish.local_channel.
    """

    output_dir: Path  # the engine's output folder (a staging folder, not the published channel)
    work_dir: Path
    channels: tuple[str, ...] = ()  # where dependencies come from; the output dir always comes first
    override_channels: bool = False  # use only the output dir and `channels`, never defaults
    pythons: tuple[str, ...] = ()
    package_format: str = "conda"
    compression_level: int | None = None
    # zstd threads for a .conda (None: the engine's own default; condapipe passes every core)
    compression_threads: int | None = None
    run_tests: bool = True
    # Issue 35 prototype, off by default: the staged fix moves the payload out of the prefix, the
    # engine packs its metadata only and condapipe writes the payload in one streaming pass
    # (condapipe.package.stage_pack). rattler-build only; its own tests are then skipped.
    pack_from_stage: bool = False
    # With pack_from_stage: the payload the pass packed stays beside the package as its unpacked
    # tree (condapipe.package.tree_record) for the plan's verify, which then unpacks nothing.
    keep_tree: bool = False
    target_platform: str | None = None
    # -m files: read after the recipe's own variant file (a later key replaces an earlier one)
    variant_files: tuple[Path, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # Where build output goes as it happens (the CLI's console); None: only the log file.
    echo: LineSink | None = field(default=None, compare=False, repr=False)
    # Told the build log's path as soon as the engine opens it (the display shows it from then on).
    log_opened: Callable[[Path], None] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.package_format not in PACKAGE_FORMATS:
            raise UsageError(
                f"unknown package format {self.package_format!r}; choose one of {', '.join(PACKAGE_FORMATS)}"
            )
        if self.compression_level is not None:
            low, high = COMPRESSION_RANGES[self.package_format]
            if not low <= self.compression_level <= high:
                raise UsageError(
                    f"compression level {self.compression_level} is out of range {low}..{high} "
                    f"for {self.package_format} packages"
                )

    def all_channels(self) -> tuple[str, ...]:
        """Channels in priority order: the output folder first, so fresh local builds win."""
        from condapipe.package.channel_order import search_order

        return search_order(self.output_dir, self.channels)


@dataclass(frozen=True)
class EngineResult:
    """What a finished build produced."""

    engine: str
    packages: tuple[Path, ...]
    log_path: Path
    seconds: float
    # Outputs the recipe's `build: skip` leaves out on this platform/variant, as the engine says
    # them: nothing of theirs is built, so nothing of theirs is ever published.
    skipped: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "packages": [str(p) for p in self.packages],
            "skipped": list(self.skipped),
            "log": str(self.log_path),
            "seconds": round(self.seconds, 2),
        }


@runtime_checkable
class Engine(Protocol):
    """A conda package builder condapipe can drive."""

    name: str
    recipe_file: str  # the recipe file this engine reads: meta.yaml (v0) or recipe.yaml (v1)

    def available(self) -> bool:
        """Whether this machine can run the engine at all."""
        ...

    def describe(self, recipe_dir: Path, options: BuildOptions) -> list[str]:
        """The actions a build would take (for --dry-run), without running anything."""
        ...

    def build(self, recipe_dir: Path, options: BuildOptions) -> EngineResult:
        """Build the recipe; raises BuildFailed (with a diagnosis of the log) when the build fails."""
        ...


def log_file_for(options: BuildOptions, recipe_name: str, engine: str) -> Path:
    """A fresh log path under the work directory, one per build attempt."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return options.work_dir / "logs" / f"{recipe_name}-{engine}-{stamp}.log"

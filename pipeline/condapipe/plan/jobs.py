"""What a plan builds: the options of a build request and the jobs (one package each) it expands to.

Plain data shared by the planner (`build_plan`) and the step bodies (`steps`), kept apart from
both so that neither imports the other's module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.engines.logs import LineSink
from condapipe.package.channel_order import search_order
from condapipe.render.model import RecipeModel


@dataclass(frozen=True)
class PlanOptions:
    """How to build: where to, with which engine, against which channels."""

    output_dir: Path  # the channel packages are published into
    work_dir: Path  # state, logs, builds in progress
    engine: str = "auto"
    channels: tuple[str, ...] = ()  # extra channels for dependencies (and prerequisite lookups)
    package_format: str = "conda"
    compression_level: int | None = None
    run_tests: bool = True
    pack_from_stage: bool = False  # condapipe.engines.base.BuildOptions.pack_from_stage
    override_channels: bool = False
    # Environment for the build tools (MAX_JOBS from doctor, ...). Not hashed: a machine with
    # more RAM must not rebuild what it already built.
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # Where the engines' build output goes as it happens (the CLI's console); None: log files only.
    echo: LineSink | None = field(default=None, compare=False, repr=False)
    # Channels of `channels` that did not answer when probed (condapipe.plan.build_channels): the engines
    # are not given them, and resolving first has shown nothing is needed from them. Not hashed, so
    # a build made offline is not redone once the network is back.
    unreachable: tuple[str, ...] = ()

    def engine_channels(self) -> tuple[str, ...]:
        """The dependency channels the engines search (the output dir is always added first)."""
        return tuple(c for c in self.channels if c not in self.unreachable)

    def search_channels(self) -> tuple[str, ...]:
        """What a build step searches: the output dir, then engine_channels (package/channel_order.py)."""
        return search_order(self.output_dir, self.engine_channels())


@dataclass(frozen=True)
class Job:
    """One package to produce: from a family spec (rendered) or from a recipe directory."""

    label: str  # unique, human-readable: "pytorch-1.8.0-py3.8-cuda11.0"
    name: str  # the conda package name, for channel lookups
    spec: BuildSpec | None = None
    recipe_dir: Path | None = None
    prerequisite: bool = False  # built only when no channel in use has `name`
    needs_jobs: tuple[str, ...] = ()  # labels of jobs whose published packages this build consumes
    platform: str | None = None
    pythons: tuple[str, ...] = ()  # a recipe directory's --python variants (a spec carries its own)
    variant_files: tuple[Path, ...] = ()  # a recipe directory's -m files, read after its own
    # a recipe directory's --env / [env] (a spec carries its own): part of the build's inputs
    env: tuple[tuple[str, str], ...] = ()
    # The recipe model of `spec`, built once when the plan is made (condapipe.plan.build_plan):
    # the plan's allowlist, the resolve step and the render step all read this one.
    model: RecipeModel | None = field(default=None, compare=False, repr=False)

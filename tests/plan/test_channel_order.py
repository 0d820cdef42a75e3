"""The order a build searches its channels, which a user relies on to get the package they built.

The output dir comes first (a package built here wins over one of the same name elsewhere), then
the dependency channels as given (-c, else the config file's, else data/channels.yaml's defaults),
then the --build-tools wheels tool channel; nothing implicit is added, each channel appears once.
One function decides it (condapipe.package.channel_order.search_order); the plan, both engines
and the resolve probes take their list from it.
"""

from __future__ import annotations

from pathlib import Path

from condapipe.engines.base import BuildOptions
from condapipe.engines.conda_build import CondaBuildEngine
from condapipe.engines.rattler_build import RattlerBuildEngine
from condapipe.plan.build_channels import channel_data, channels_in_use, dependency_channels
from condapipe.plan.jobs import PlanOptions


def _folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    out, deps, tool = tmp_path / "out", tmp_path / "deps", tmp_path / "work" / "tool-channel"
    for folder in (out, deps, tool):
        folder.mkdir(parents=True)
    return out, deps, tool


def test_the_output_dir_then_the_given_channels_then_the_tool_channel(tmp_path: Path) -> None:
    out, deps, tool = _folders(tmp_path)
    remote = "https://example.invalid/extra"
    channels, dropped = channels_in_use([str(deps), remote, str(out)], tool_channel=str(tool))
    assert dropped == ()
    options = PlanOptions(output_dir=out, work_dir=tmp_path / "work", channels=channels)
    expected = (str(out.resolve()), str(deps), remote, str(tool))
    assert options.search_channels() == expected  # the output dir once, first, though -c named it too

    # a build step's engine: its staging folder, then exactly the plan's list, nothing implicit
    staging = tmp_path / "work" / "build" / "out"
    engine = BuildOptions(output_dir=staging, work_dir=tmp_path / "work", channels=options.search_channels())
    assert engine.all_channels() == (str(staging.resolve()), *expected)
    assert RattlerBuildEngine().channels(engine) == list(engine.all_channels())
    argv = CondaBuildEngine().argv(("conda", "build"), tmp_path / "recipe", engine)
    assert [argv[i + 1] for i, word in enumerate(argv) if word == "-c"] == list(engine.all_channels())
    assert not any(c in engine.all_channels() for c in channel_data()["default_channels"])


def test_the_defaults_only_when_no_channel_is_given_and_an_unreachable_one_keeps_its_place(
    tmp_path: Path,
) -> None:
    out, deps, tool = _folders(tmp_path)
    defaults = tuple(str(c) for c in channel_data()["default_channels"])
    assert dependency_channels(()) == defaults
    assert dependency_channels([str(deps)]) == (str(deps),)  # a given list replaces the defaults
    channels, _ = channels_in_use((), tool_channel=str(tool))
    assert channels == (*defaults, str(tool))
    late = "https://example.invalid/late"
    options = PlanOptions(
        output_dir=out, work_dir=tmp_path / "work", channels=(late, str(deps)), unreachable=(late,)
    )
    assert options.search_channels() == (str(out.resolve()), str(deps))


def test_offline_keeps_the_local_channels_in_their_order(tmp_path: Path) -> None:
    out, deps, tool = _folders(tmp_path)
    remote = "https://example.invalid/extra"
    channels, dropped = channels_in_use([remote, str(deps)], tool_channel=str(tool), offline=True)
    assert (channels, dropped) == ((str(deps), str(tool)), (remote,))
    options = PlanOptions(output_dir=out, work_dir=tmp_path / "work", channels=channels)
    assert options.search_channels() == (str(out.resolve()), str(deps), str(tool))

"""Resolve first, as the CLI shows it: the solved environments before the plan, or why they fail.

`build PACKAGE` and `build RECIPE_DIR` both call `resolve_before_building` after planning and
before running anything, so a missing dependency or an unreachable channel stops the build at
once (exit 3) with the fix, instead of after hours of compiling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from condapipe.cli.output import console, err_console

if TYPE_CHECKING:
    from condapipe.plan import Plan
    from condapipe.plan.build_channels import ChannelSetup
    from condapipe.plan.resolve import Resolution


def resolve_before_building(
    plan: Plan, setup: ChannelSetup | None, *, run_tests: bool, dry_run: bool, as_json: bool
) -> Resolution | None:
    """Solve the plan's environments; print them (a dry run: on stdout, with key versions) and
    return the Resolution. A failure is printed line by line and returned: the caller raises
    `resolution.problem()` once it has shown what it shows (the dry run's plan)."""
    if setup is None:
        return None
    from condapipe.plan.environments import RecipeFacts
    from condapipe.plan.resolve import resolve_plan

    tools: tuple[RecipeFacts, ...] = ()
    if setup.planned_tools:  # a dry run's tool channel, not written: its packages as planned
        from condapipe.inputchannels.tool_channel import BUILD_STRING

        tools = tuple(
            RecipeFacts("tool-channel", name, version, BUILD_STRING, "linux-64", (), (), "PyPI wheel")
            for name, version in setup.planned_tools
        )
    resolution = resolve_plan(
        plan,
        setup.statuses,
        run_tests=run_tests,
        offline_dropped=setup.offline_dropped,
        extra_planned=tools,
    )
    if as_json:
        return resolution
    if dry_run:
        for line in ["resolve:", *("  " + line for line in resolution.summary_lines())]:
            console.print(line, soft_wrap=True, markup=False, highlight=False)
    else:
        envs = len(resolution.solved)
        if envs:
            err_console.print(
                f"resolved {envs} environment{'s' if envs != 1 else ''} before building "
                f"({', '.join(c.url for c in setup.statuses if c.usable) or 'no channel'})",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
        for note in resolution.notes:
            err_console.print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)
    for line in resolution.detail_lines() if not resolution.ok else ():
        err_console.print(line, soft_wrap=True, markup=False, highlight=False)
    return resolution

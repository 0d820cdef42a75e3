"""The live step display and the final summary, on a terminal and in a log.

Step ids, paths and error messages are shown as text: a message such as "tests [0] failed" or a
path with brackets must appear as written, never be taken for rich markup (which would crash the
display at the end of a long build).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from condapipe.errors import BuildFailed
from condapipe.plan.progress import StepDisplay
from condapipe.plan.report import build_report, print_summary, to_markdown, write_report
from condapipe.plan.runner import Plan, PlanFailed, Step, StepContext, StepOutcome, run_plan

NASTY = "tests [0] of pkg[/] failed [red]"


def ok(ctx: StepContext) -> StepOutcome:
    out = ctx.step_dir / "out.txt"
    out.write_text("x")
    return StepOutcome(files=(out,))


def bad(ctx: StepContext) -> StepOutcome:
    raise BuildFailed(NASTY)


def plan(tmp_path: Path) -> Plan:
    return Plan(
        steps=(
            Step("build:[weird]", "build", "build it", {}, ok, package="p"),
            Step("test:p", "test", "test it", {}, bad, needs=("build:[weird]",), package="p"),
        ),
        work_dir=tmp_path / "work",
        output_dir=tmp_path / "channel",
    )


@pytest.mark.parametrize("terminal", [True, False])
def test_bracketed_ids_and_messages_are_shown_literally(tmp_path: Path, terminal: bool) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=terminal, width=200, color_system=None)
    p = plan(tmp_path)
    with pytest.raises(PlanFailed) as info, StepDisplay(p, console, live=terminal) as display:
        run_plan(p, display=display)
    report = build_report(p, info.value.result, error=str(info.value.cause))
    print_summary(report, console)
    text = buffer.getvalue()
    assert NASTY in text and "build:[weird]" in text


def test_a_log_gets_one_line_per_step_event_and_the_step_log_when_it_starts(tmp_path: Path) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    p = plan(tmp_path)
    with pytest.raises(PlanFailed), StepDisplay(p, console) as display:
        run_plan(p, display=display)
    lines = buffer.getvalue().splitlines()
    assert lines[0].startswith("▶ build:[weird]: build it")
    assert lines[1] == f"  log: {tmp_path / 'work' / 'logs' / 'build__weird_.log'}"
    assert lines[2].strip().startswith("ran build:[weird]")
    assert lines[3].startswith("▶ test:p") and lines[4].startswith("  log: ")
    assert lines[5].strip().startswith("failed test:p") and NASTY in lines[5]


def test_the_markdown_report_of_a_failure_names_the_failed_step_and_its_log(tmp_path: Path) -> None:
    p = plan(tmp_path)
    with pytest.raises(PlanFailed) as info:
        run_plan(p)
    json_path, md_path = write_report(build_report(p, info.value.result, error=NASTY), p.work_dir)
    md = md_path.read_text()
    assert md.startswith("# condapipe build report — FAILED")
    assert "| test:p | failed | " in md and str(tmp_path / "work" / "logs" / "test_p.log") in md
    assert to_markdown(build_report(p, info.value.result, error=NASTY)) == md
    assert json_path.name == "report.json"

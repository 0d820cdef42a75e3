"""How a plan decides what to run: input hashes, outputs on disk, failures, the state file.

These plans are made of small steps that write real files, so the decisions are observable
without building packages: which steps ran, which were skipped, and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from condapipe.errors import BuildFailed, EnvironmentProblem
from condapipe.plan.runner import Plan, PlanFailed, Step, StepContext, StepOutcome, describe, run_plan
from condapipe.plan.state import STATE_FILE, StateFile, work_dir_lock


def writer(name: str, text: str, calls: list[str]):
    def act(ctx: StepContext) -> StepOutcome:
        calls.append(ctx.step.id)
        out = ctx.step_dir / name
        out.write_text(text + "".join(p.read_text() for d in ctx.step.needs for p in ctx.dep_files(d)))
        return StepOutcome(files=(out,), data={"chars": len(out.read_text())})

    return act


def failing(ctx: StepContext) -> StepOutcome:
    raise BuildFailed("the compiler ran out of memory")


def chain(tmp_path: Path, calls: list[str], *, a: str = "A", b_action=None) -> Plan:
    return Plan(
        steps=(
            Step("a", "render", "first", {"text": a}, writer("a.txt", a, calls)),
            Step(
                "b",
                "build",
                "second",
                {"flags": "-O2"},
                b_action or writer("b.txt", "B", calls),
                needs=("a",),
            ),
            Step("c", "publish", "third", {}, writer("c.txt", "C", calls), needs=("b",)),
        ),
        work_dir=tmp_path / "work",
        output_dir=tmp_path / "channel",
    )


def statuses(result) -> dict[str, str]:
    return {r.step.id: r.status for r in result.results}


def test_a_first_run_runs_every_step_in_order_and_records_it(tmp_path: Path) -> None:
    calls: list[str] = []
    result = run_plan(chain(tmp_path, calls))
    assert calls == ["a", "b", "c"]
    assert statuses(result) == {"a": "ran", "b": "ran", "c": "ran"}
    state = json.loads((tmp_path / "work" / STATE_FILE).read_text())
    assert sorted(state["steps"]) == ["a", "b", "c"]
    assert (tmp_path / "work" / "logs" / "b.log").read_text().count("finished in") == 1


def test_an_unchanged_rerun_runs_nothing(tmp_path: Path) -> None:
    calls: list[str] = []
    run_plan(chain(tmp_path, calls))
    calls.clear()
    result = run_plan(chain(tmp_path, calls))
    assert calls == []
    assert set(statuses(result).values()) == {"unchanged"}


def test_a_changed_input_reruns_its_step_and_what_reads_its_output(tmp_path: Path) -> None:
    calls: list[str] = []
    run_plan(chain(tmp_path, calls))
    calls.clear()
    plan = chain(tmp_path, calls, a="A2")
    assert [r["why"] for r in describe(plan)] == ["inputs changed: text", "runs after a", "runs after b"]
    run_plan(plan)
    assert calls == ["a", "b", "c"]


def test_a_rerun_whose_output_is_identical_stops_the_cascade(tmp_path: Path) -> None:
    calls: list[str] = []
    run_plan(chain(tmp_path, calls))
    (tmp_path / "work" / "steps" / "a" / "a.txt").unlink()  # a must run again ...
    calls.clear()
    result = run_plan(chain(tmp_path, calls))
    assert calls == ["a"]  # ... but writes the same bytes, so b and c stay finished
    assert statuses(result) == {"a": "ran", "b": "unchanged", "c": "unchanged"}


def test_a_missing_or_modified_output_reruns_the_step(tmp_path: Path) -> None:
    calls: list[str] = []
    run_plan(chain(tmp_path, calls))
    out = tmp_path / "work" / "steps" / "c" / "c.txt"
    out.write_text("tampered")
    decisions = {r["id"]: r["why"] for r in describe(chain(tmp_path, calls))}
    assert decisions["c"] == f"output missing or modified: {out}"
    calls.clear()
    run_plan(chain(tmp_path, calls))
    assert calls == ["c"] and out.read_text() == "CBA"


def test_a_failed_step_stops_the_plan_and_the_rerun_resumes_there(tmp_path: Path) -> None:
    calls: list[str] = []
    with pytest.raises(PlanFailed) as info:
        run_plan(chain(tmp_path, calls, b_action=failing))
    assert info.value.exit_code == 1 and "out of memory" in str(info.value)
    assert statuses(info.value.result) == {"a": "ran", "b": "failed", "c": "not-run"}
    assert StateFile(tmp_path / "work" / STATE_FILE).get("b") is None
    assert "the compiler ran out of memory" in (tmp_path / "work" / "logs" / "b.log").read_text()
    calls.clear()
    result = run_plan(chain(tmp_path, calls))
    assert calls == ["b", "c"] and statuses(result)["a"] == "unchanged"


def test_an_unexpected_exception_becomes_a_one_line_build_failure_with_the_log(tmp_path: Path) -> None:
    def crash(ctx: StepContext) -> StepOutcome:
        raise KeyError("no such field")

    with pytest.raises(PlanFailed) as info:
        run_plan(chain(tmp_path, [], b_action=crash))
    assert isinstance(info.value.cause, BuildFailed)
    assert "b: 'no such field'" in str(info.value) and "log: " in str(info.value)
    assert "Traceback" in (tmp_path / "work" / "logs" / "b.log").read_text()


def test_a_planned_skip_is_reported_with_its_reason_and_runs_nothing(tmp_path: Path) -> None:
    calls: list[str] = []
    plan = Plan(
        steps=(
            Step(
                "x", "build", "prerequisite", {}, writer("x", "X", calls), skip_reason="not needed: x is in C"
            ),
            Step("y", "build", "main", {}, writer("y", "Y", calls), needs=("x",)),
        ),
        work_dir=tmp_path / "work",
        output_dir=tmp_path / "channel",
    )
    result = run_plan(plan)
    assert calls == ["y"]
    first = result.results[0]
    assert (first.status, first.reason) == ("skipped", "not needed: x is in C")


def test_steps_must_come_after_the_steps_they_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs"):
        Plan(
            steps=(Step("b", "build", "", {}, failing, needs=("a",)), Step("a", "render", "", {}, failing)),
            work_dir=tmp_path,
            output_dir=tmp_path,
        )


def test_an_unreadable_state_file_is_set_aside_and_everything_runs(tmp_path: Path) -> None:
    calls: list[str] = []
    run_plan(chain(tmp_path, calls))
    state = tmp_path / "work" / STATE_FILE
    state.write_text('{"schema": 1, "steps": {"a": ')  # what a non-atomic writer could leave
    calls.clear()
    run_plan(chain(tmp_path, calls))
    assert calls == ["a", "b", "c"]
    assert (tmp_path / "work" / (STATE_FILE + ".unreadable")).exists()
    assert json.loads(state.read_text())["schema"] == 1


def test_two_runs_in_one_work_dir_do_not_run_at_once(tmp_path: Path) -> None:
    with work_dir_lock(tmp_path / "work"), pytest.raises(EnvironmentProblem, match="another condapipe build"):
        run_plan(chain(tmp_path, []))


def test_a_dry_run_on_a_fresh_work_dir_creates_nothing(tmp_path: Path) -> None:
    rows = describe(chain(tmp_path, []))
    assert [(r["id"], r["action"]) for r in rows] == [("a", "run"), ("b", "run"), ("c", "run")]
    assert rows[1]["inputs"] == {"flags": "-O2"} and rows[1]["needs"] == ["a"]
    assert not (tmp_path / "work").exists()


def _stopped_in(step_id: str):
    """An action that stops the whole run the way Ctrl-C does (KeyboardInterrupt out of the step)."""

    def act(ctx: StepContext) -> StepOutcome:
        raise KeyboardInterrupt

    return act


def test_a_step_stopped_on_the_way_is_continued_not_started_as_new(tmp_path: Path) -> None:
    calls: list[str] = []
    run_plan(chain(tmp_path, calls))
    with pytest.raises(KeyboardInterrupt):
        run_plan(chain(tmp_path, calls, a="A2", b_action=_stopped_in("b")))
    assert (tmp_path / "work" / "started" / "b.json").is_file()

    # The same inputs: the rerun says it continues the unfinished run (what it kept is reused).
    rows = describe(chain(tmp_path, calls, a="A2"))
    assert rows[1]["why"].startswith("continues an unfinished run: started ")
    # Other inputs than the stopped run had: said so, with what changed since the last finish.
    rows = describe(chain(tmp_path, calls, a="A3"))
    assert rows[0]["why"] == "inputs changed: text"
    assert rows[1]["why"] == "runs after a"
    run_plan(chain(tmp_path, calls, a="A2"))
    assert not (tmp_path / "work" / "started" / "b.json").exists()  # finished: nothing to continue
    assert [r["why"] for r in describe(chain(tmp_path, calls, a="A2"))][1].startswith("unchanged")


def test_a_stopped_step_whose_own_inputs_changed_says_which(tmp_path: Path) -> None:
    calls: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_plan(chain(tmp_path, calls, b_action=_stopped_in("b")))
    plan = chain(tmp_path, calls)
    steps = list(plan.steps)
    steps[1] = Step("b", "build", "second", {"flags": "-O3"}, steps[1].action, needs=("a",))
    rows = describe(Plan(tuple(steps), plan.work_dir, plan.output_dir))
    assert rows[1]["why"].startswith("continues an unfinished run with changed inputs: started ")

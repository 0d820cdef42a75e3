"""What the display reads of a running build's output: ninja's [n/N] and CMake-make's [ 45%], as
rattler-build shows them (after its "│ │ " prefix) or bare, and nothing from lines that merely
contain brackets."""

from __future__ import annotations

from pathlib import Path

from condapipe.plan.step_progress import StepProgress, span


def test_ninja_counts_are_read_after_the_engines_prefix() -> None:
    progress = StepProgress(Path("/w/logs/build.log"))
    progress.line(" │ │ [412/1338] Building CUDA object magmablas/zgemm.cu.o")
    view = progress.view()
    assert (view.done, view.total, view.compile_text()) == (412, 1338, "[412/1338] 30%")
    assert view.log == Path("/w/logs/build.log")
    assert view.seconds_left is None  # too little progress seen for an estimate


def test_make_percentages_count_too_and_other_brackets_do_not() -> None:
    progress = StepProgress()
    progress.line("[ 45%] Building C object CMakeFiles/x.dir/a.c.o")
    assert progress.view().compile_text() == "45%"
    progress.line("warning: array subscript [5/2] is outside")  # no space-separated status form
    progress.line("x[1/2]y")
    assert progress.view().compile_text() == "45%"


def test_a_new_ninja_run_restarts_the_count_and_the_log_can_change() -> None:
    progress = StepProgress(Path("/w/step.log"))
    seen: list[Path] = []
    progress.log_changed = seen.append
    progress.line("[90/100] Linking")
    progress.line("[1/3] Re-running CMake...")
    assert progress.view().compile_text() == "[1/3] 33%"
    progress.set_log(Path("/w/engine.log"))
    assert progress.view().log == Path("/w/engine.log") and seen == [Path("/w/engine.log")]


def test_spans_are_short() -> None:
    assert [span(s) for s in (0, 45, 192, 3720)] == ["0s", "45s", "3m12s", "1h02m"]

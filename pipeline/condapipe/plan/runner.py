"""Plans: an ordered list of steps, each skipped when its inputs are unchanged since it last finished.

A user asks for one thing (`condapipe build pytorch --cuda 11.0`) and gets a chain of steps
(magma → render → build → fix → verify → test → publish). Each step declares its inputs as JSON
data plus the steps whose outputs it reads; the hash of both decides whether a rerun can skip it.
That is what makes a rerun after `kill -9` resume instead of restart, and an unchanged rerun
finish in well under a second. Which steps a build has is `condapipe.plan.build_plan`, what they do
is `condapipe.plan.steps`; this module only decides, runs, records and describes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from condapipe.errors import BuildFailed, CondapipeError
from condapipe.plan import interrupted
from condapipe.plan.state import STATE_FILE, FileRecord, StateFile, StepRecord, work_dir_lock
from condapipe.plan.step_progress import StepProgress
from condapipe.process_settings import process

# Test hook: comma-separated pause points ("before:<step-id>", "after:<step-id>", "publish:copied", ...).
# At a listed point the process appends the point's name to CONDAPIPE_TEST_PAUSE_FILE and sleeps,
# so a test can `kill -9` it at exactly that moment. Unset in normal use; both variables are read
# once into condapipe.process_settings.


def pause_point(name: str) -> None:
    """Stop here (for a test to kill the process) when CONDAPIPE_TEST_PAUSE names this point."""
    hooks = process()
    if name not in hooks.pause_points:
        return
    if hooks.pause_file:
        with open(hooks.pause_file, "a", encoding="utf-8") as fh:
            fh.write(name + "\n")
    time.sleep(3600)


class StepLog:
    """The per-step log file under <work dir>/logs: what the step did, where its tool logs are."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")

    def write(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        for line in text.splitlines() or [""]:
            self._fh.write(f"{stamp} {line}\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


@dataclass
class StepContext:
    """What a running step may use: a private empty directory, its log, and the records it reads."""

    step: Step
    work_dir: Path
    step_dir: Path
    log: StepLog
    deps: Mapping[str, StepRecord]
    # Where the step reports its progress (its tool's log, [n/N] of a compile): the display reads it.
    progress: StepProgress = field(default_factory=StepProgress)

    def dep_files(self, step_id: str) -> list[Path]:
        rec = self.deps.get(step_id)
        return [Path(f.path) for f in rec.outputs] if rec else []


@dataclass(frozen=True)
class StepOutcome:
    """What a step produced: files whose fingerprints are recorded, and JSON facts for the report."""

    files: tuple[Path, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One unit of resumable work."""

    id: str  # unique in the plan, e.g. "build:pytorch-1.8.0-py3.8-cuda11.0"
    kind: str  # render | build | fix | verify | test | publish | ...
    title: str
    inputs: Mapping[str, Any]  # JSON-able; every value that should trigger a rerun when it changes
    action: Callable[[StepContext], StepOutcome]
    needs: tuple[str, ...] = ()  # steps whose outputs this one reads (their outputs join the hash)
    skip_reason: str | None = None  # decided while planning (e.g. "magma-cuda110 is in channel X")
    package: str = ""  # the package label this step belongs to, for grouping in reports


@dataclass(frozen=True)
class Plan:
    """The ordered steps for one request, and where they read and write."""

    steps: tuple[Step, ...]
    work_dir: Path
    output_dir: Path
    request: Mapping[str, Any] = field(default_factory=dict)  # what the user asked, for the report
    notes: tuple[str, ...] = ()  # planning facts worth showing (channels queried, ...)
    jobs: tuple[Any, ...] = ()  # the plan.jobs.Job each package comes from (resolve reads their recipes)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"duplicate step id {step.id}")
            missing = [n for n in step.needs if n not in seen]
            if missing:
                raise ValueError(f"step {step.id} needs {missing}, which do not come before it")
            seen.add(step.id)

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    @property
    def state_path(self) -> Path:
        return self.work_dir / STATE_FILE


class StepObserver(Protocol):
    """Told as steps start and finish (condapipe.plan.progress.StepDisplay shows them live)."""

    def started(self, step: Step, why: str) -> None: ...

    def finished(self, step: Step, status: str, why: str, seconds: float) -> None: ...


class ProgressObserver(Protocol):
    """An observer that also follows a running step's own progress (optional)."""

    def watch(self, step: Step, progress: StepProgress) -> None: ...


# ---------------------------------------------------------------- hashing


def _digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _dep_fingerprint(rec: StepRecord) -> dict[str, Any]:
    """What a dependent step sees of a finished step: its output contents and facts, not timestamps."""
    return {"files": sorted(f.sha256 for f in rec.outputs), "data": _digest(rec.data)}


def input_parts(step: Step, deps: Mapping[str, StepRecord | None]) -> dict[str, str]:
    """Per-input digests; their combination is the step's input hash."""
    parts = {f"input:{k}": _digest(v) for k, v in step.inputs.items()}
    parts["kind"] = _digest(step.kind)
    for dep_id, rec in deps.items():
        parts[f"after:{dep_id}"] = _digest(_dep_fingerprint(rec)) if rec else "missing"
    return parts


def combine(parts: Mapping[str, str]) -> str:
    return _digest(sorted(parts.items()))


# ---------------------------------------------------------------- deciding


@dataclass(frozen=True)
class Decision:
    """Whether a step runs, and why (shown by --dry-run and in the report)."""

    run: bool
    reason: str
    input_hash: str | None = None


def _changed_inputs(old: StepRecord, parts: Mapping[str, str]) -> list[str]:
    keys = sorted(set(old.input_parts) | set(parts))
    changed = [k for k in keys if old.input_parts.get(k) != parts.get(k)]
    return [k.split(":", 1)[-1] for k in changed]


def decide(step: Step, state: StateFile, pending: set[str]) -> Decision:
    """Run or skip `step`, given the state file and the steps that will (re)run before it."""
    if step.skip_reason:
        return Decision(False, step.skip_reason)
    waiting = [d for d in step.needs if d in pending]
    if waiting:
        return Decision(True, f"runs after {', '.join(waiting)}")
    deps = {d: state.get(d) for d in step.needs}
    parts = input_parts(step, deps)
    h = combine(parts)
    old = state.get(step.id)
    stopped = _unfinished(state, step.id)
    if stopped is not None and (old is None or old.input_hash != h):
        # Stopped on the way (Ctrl-C, SIGTERM, kill -9, a failure): what it kept (a build's compile
        # cache) serves the rerun; changed inputs recompile only what they change.
        if stopped.input_hash == h:
            return Decision(True, f"continues an unfinished run: {stopped.describe()}", h)
        changed = f": {', '.join(_changed_inputs(old, parts))}" if old is not None else ""
        return Decision(
            True, f"continues an unfinished run with changed inputs{changed}: {stopped.describe()}", h
        )
    if old is None:
        return Decision(True, "not done before", h)
    if old.input_hash != h:
        return Decision(True, f"inputs changed: {', '.join(_changed_inputs(old, parts)) or 'hash'}", h)
    gone = [f.path for f in old.outputs if not f.unchanged()]
    if gone:
        return Decision(True, f"output missing or modified: {gone[0]}", h)
    return Decision(False, "unchanged (inputs and outputs match the finished step)", h)


def _unfinished(state: StateFile, step_id: str) -> interrupted.Started | None:
    """The step's start that never finished, in the state's work dir (none for a dry run's empty state)."""
    path = getattr(state, "path", None)
    return interrupted.previous(path.parent, step_id) if isinstance(path, Path) else None


def describe(plan: Plan) -> list[dict[str, Any]]:
    """The plan as data for --dry-run: each step, its inputs, and whether and why it would run."""
    state = StateFile(plan.state_path) if plan.state_path.exists() else _EmptyState()
    pending: set[str] = set()
    rows = []
    for step in plan.steps:
        d = decide(step, state, pending)  # type: ignore[arg-type]
        if d.run:
            pending.add(step.id)
        rows.append(
            {
                "id": step.id,
                "kind": step.kind,
                "title": step.title,
                "package": step.package,
                "needs": list(step.needs),
                "inputs": dict(step.inputs),
                "action": "run" if d.run else "skip",
                "why": d.reason,
            }
        )
    return rows


class _EmptyState:
    """A state with nothing finished (a dry run must not create the work directory)."""

    def get(self, step_id: str) -> None:
        return None


# ---------------------------------------------------------------- running


@dataclass(frozen=True)
class StepResult:
    """How one step went in this run."""

    step: Step
    status: str  # "ran" | "unchanged" | "skipped" | "failed" | "not-run"
    reason: str
    seconds: float = 0.0
    log: Path | None = None
    record: StepRecord | None = None
    error: str | None = None
    exception: CondapipeError | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.step.id,
            "kind": self.step.kind,
            "title": self.step.title,
            "package": self.step.package,
            "status": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
            "log": str(self.log) if self.log else None,
            "outputs": [f.to_dict() for f in self.record.outputs] if self.record else [],
            "data": dict(self.record.data) if self.record else {},
            "error": self.error,
        }


@dataclass(frozen=True)
class PlanResult:
    """All step results of one run, in plan order."""

    plan: Plan
    results: tuple[StepResult, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(r.status in ("ran", "unchanged", "skipped") for r in self.results)

    def records(self) -> dict[str, StepRecord]:
        return {r.step.id: r.record for r in self.results if r.record is not None}


def _log_path(work_dir: Path, step_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in step_id)
    return work_dir / "logs" / f"{safe}.log"


def step_dir_for(work_dir: Path, step_id: str) -> Path:
    """The private output directory of a step (emptied before each run: no leftovers of a killed run)."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in step_id)
    return work_dir / "steps" / safe


def run_plan(
    plan: Plan, *, display: StepObserver | None = None, notify: Callable[[str], None] | None = None
) -> PlanResult:
    """Run every step that needs running, recording each as it finishes; stop at the first failure.
    `notify` gets the one line that says an earlier build's leftovers were stopped (work_dir_lock).

    A failure raises PlanFailed, which carries the PlanResult so far (for the report) and the
    exit code of the step's own error.
    """
    start = time.monotonic()
    results: list[StepResult] = []
    with work_dir_lock(plan.work_dir, notify):
        state = StateFile(plan.state_path)
        pending: set[str] = set()  # stays empty: a step that ran is recorded before the next decides
        failure: CondapipeError | None = None
        try:
            for step in plan.steps:
                if failure is not None:
                    results.append(StepResult(step, "not-run", "an earlier step failed"))
                    continue
                decision = decide(step, state, pending)
                if not decision.run:
                    status = "skipped" if step.skip_reason else "unchanged"
                    results.append(StepResult(step, status, decision.reason, record=state.get(step.id)))
                    if display:
                        display.finished(step, status, decision.reason, 0.0)
                    continue
                result = _run_step(step, plan, state, decision, display)
                results.append(result)
                if result.status == "failed":
                    failure = result.exception
        finally:  # kept trees a step discarded are removed beside the later steps: gone before we return
            from condapipe.package import tree_record

            tree_record.wait_for_removals()
        outcome = PlanResult(plan, tuple(results), time.monotonic() - start)
        if failure is not None:
            raise PlanFailed(outcome, failure)
        return outcome


class PlanFailed(CondapipeError):
    """A step failed; carries the partial PlanResult so the report can still be written."""

    def __init__(self, result: PlanResult, cause: CondapipeError) -> None:
        super().__init__(str(cause))
        self.result = result
        self.cause = cause
        self.exit_code = cause.exit_code


def _run_step(
    step: Step, plan: Plan, state: StateFile, decision: Decision, display: StepObserver | None
) -> StepResult:
    all_deps = {d: state.get(d) for d in step.needs}
    # A needed step skipped by the plan (e.g. magma found in a channel) has no record: it contributes nothing.
    deps = {d: r for d, r in all_deps.items() if r is not None}
    parts = input_parts(step, all_deps)
    input_hash = combine(parts)
    log_path = _log_path(plan.work_dir, step.id)
    step_dir = step_dir_for(plan.work_dir, step.id)
    if step_dir.exists():
        shutil.rmtree(step_dir)
    step_dir.mkdir(parents=True)
    log = StepLog(log_path)
    log.write(f"== {step.id}: {step.title} ({decision.reason})")
    interrupted.mark_started(plan.work_dir, step.id, input_hash)
    progress = StepProgress(log_path, on_alive=lambda: interrupted.touch(plan.work_dir, step.id))
    if display:
        display.started(step, decision.reason)
        watch = getattr(display, "watch", None)
        if callable(watch):
            watch(step, progress)
    t0 = time.monotonic()
    pause_point(f"before:{step.id}")
    try:
        outcome = step.action(StepContext(step, plan.work_dir, step_dir, log, deps, progress))
    except Exception as exc:
        seconds = time.monotonic() - t0
        log.write(f"FAILED after {seconds:.1f}s:\n{traceback.format_exc()}")
        log.close()
        err = (
            exc
            if isinstance(exc, CondapipeError)
            else BuildFailed(f"{step.id}: {exc}", log_path=str(log_path))
        )
        state.forget(step.id)
        if display:
            display.finished(step, "failed", str(err), seconds)
        return StepResult(step, "failed", decision.reason, seconds, log_path, error=str(err), exception=err)
    seconds = time.monotonic() - t0
    rec = StepRecord(
        step_id=step.id,
        input_hash=input_hash,
        input_parts=parts,
        outputs=tuple(FileRecord.of(p) for p in outcome.files),
        data=dict(outcome.data),
        finished_at=time.time(),
        seconds=seconds,
    )
    pause_point(f"after:{step.id}")
    state.record(rec)
    interrupted.finished(plan.work_dir, step.id)
    log.write(f"finished in {seconds:.1f}s; outputs: {', '.join(str(p) for p in outcome.files) or 'none'}")
    log.close()
    if display:
        display.finished(step, "ran", decision.reason, seconds)
    return StepResult(step, "ran", decision.reason, seconds, log_path, record=rec)

"""plan: ordered, resumable build steps, their state file, progress and report.

Entry points: `make_family_plan` / `make_recipe_plan` (request + PlanOptions -> Plan), `describe`
(--dry-run rows), `run_plan` (raises PlanFailed carrying the partial PlanResult), `StepDisplay`
(live progress on a console the caller passes), `build_report` / `write_report` / `print_summary`.
Inside: jobs -> build_plan -> steps (stage calls) -> runner (decide, run, record) -> state.
"""

from condapipe.plan.build_plan import make_family_plan, make_recipe_plan
from condapipe.plan.jobs import PlanOptions
from condapipe.plan.progress import StepDisplay
from condapipe.plan.report import build_report, print_summary, write_report
from condapipe.plan.runner import Plan, PlanFailed, PlanResult, describe, run_plan

__all__ = [
    "Plan",
    "PlanFailed",
    "PlanOptions",
    "PlanResult",
    "StepDisplay",
    "build_report",
    "describe",
    "make_family_plan",
    "make_recipe_plan",
    "print_summary",
    "run_plan",
    "write_report",
]

"""A plan as a person reads it at a glance: one short line per package and reason.

`--dry-run` used to print every step with its inputs (spec dicts cut at 100 characters, 64-hex
code hashes) and one "stop" line per step with the same reason. Here a step that runs only
because an earlier one does ("runs after render:…") takes that step's reason, steps of a package
with one reason share a line, and packages with the same reason fold under it with a count.
Inputs and hashes stay available: `--debug` adds them in full, `--json` has everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

_AFTER = "runs after "
_MARK = {"run": "run ", "stop": "stop", "skip": "skip"}


def shown_path(path: Path) -> str:
    """`path` as the user most likely typed it: relative to the current folder when inside it."""
    try:
        relative = path.relative_to(Path.cwd())
    except ValueError:
        return str(path)
    return str(relative) if str(relative) != "." else "."


def _reasons(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Each row's own reason: a step that runs after another takes the first one's reason."""
    by_id: dict[str, str] = {}
    out: list[str] = []
    for row in rows:
        why = str(row["why"])
        if why.startswith(_AFTER):
            first = why[len(_AFTER) :].split(", ")[0]
            why = by_id.get(first, why)
        by_id[str(row["id"])] = why
        out.append(why)
    return out


def step_groups(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, list[str]]]:
    """(action, reason, package, step kinds) for each run of rows with one package, action and reason."""
    groups: list[tuple[str, str, str, list[str]]] = []
    for row, why in zip(rows, _reasons(rows), strict=True):
        key = (str(row["action"]), why, str(row["package"]))
        if groups and groups[-1][:3] == key:
            groups[-1][3].append(str(row["kind"]))
        else:
            groups.append((*key, [str(row["kind"])]))
    return groups


def plan_lines(
    rows: Sequence[dict[str, Any]], *, output_dir: Path, work_dir: Path, notes: Sequence[str] = ()
) -> list[str]:
    """The short lines of a dry run: a head line, one per package and reason, folded, then notes."""
    engines = sorted(
        {str(r["inputs"]["engine"]) for r in rows if r["kind"] == "build" and "engine" in r["inputs"]}
    )
    using = f" with {', '.join(engines)}" if engines else ""
    lines = [
        f"plan: {len(rows)} steps{using} into {shown_path(output_dir)} (work dir {shown_path(work_dir)})"
    ]
    groups = step_groups(rows)
    i = 0
    while i < len(groups):
        action, why = groups[i][:2]
        j = i
        while j + 1 < len(groups) and groups[j + 1][:2] == (action, why):
            j += 1
        mark = _MARK.get(action, action)
        if j == i:
            _, _, package, kinds = groups[i]
            lines.append(f"  {mark} {package}: {', '.join(kinds)} — {why}")
        else:
            steps = sum(len(g[3]) for g in groups[i : j + 1])
            lines.append(f"  {mark} (×{steps} steps) — {why}:")
            lines += [f"      {g[2]}: {', '.join(g[3])}" for g in groups[i : j + 1]]
        i = j + 1
    lines += [f"  note: {note}" for note in notes]
    return lines


def input_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every step's inputs in full (for --debug): what decides whether it runs again."""
    lines = ["step inputs:"]
    for row in rows:
        lines.append(f"  {row['id']} ({row['action']}: {row['why']})")
        lines += [f"      {key}: {value}" for key, value in row["inputs"].items()]
    return lines

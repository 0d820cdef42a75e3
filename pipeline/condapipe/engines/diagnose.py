"""Build-log diagnosis: turn the known failures of CUDA/PyTorch builds into a cause and a fix.

A failed 9-hour build leaves a log of hundreds of MB; the few failures that recur in this field
are recognisable by one line each. The patterns live in data/diagnoses.yaml so that adding a
known failure is a data change, not a code change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ruamel.yaml import YAML


@dataclass(frozen=True)
class Rule:
    """One known failure: any of `patterns` on a line means `cause`, cured by `fix`."""

    id: str
    title: str
    patterns: tuple[re.Pattern[str], ...]
    cause: str
    fix: str


@dataclass(frozen=True)
class Diagnosis:
    """A rule that matched, with the first log line that matched it."""

    id: str
    title: str
    cause: str
    fix: str
    line_no: int  # 1-based
    line: str

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "cause": self.cause,
            "fix": self.fix,
            "line_no": self.line_no,
            "line": self.line,
        }

    def one_line(self) -> str:
        return f"{self.title}: {self.cause}; fix: {self.fix}"


def _parse_rules(text: str) -> tuple[Rule, ...]:
    data = YAML(typ="safe").load(text)
    rules = []
    for entry in data["diagnoses"]:
        rules.append(
            Rule(
                id=entry["id"],
                title=entry["title"],
                patterns=tuple(re.compile(p) for p in entry["patterns"]),
                cause=" ".join(str(entry["cause"]).split()),
                fix=" ".join(str(entry["fix"]).split()),
            )
        )
    return tuple(rules)


@lru_cache(maxsize=1)
def load_rules() -> tuple[Rule, ...]:
    """The known failures shipped with condapipe, in priority order."""
    return _parse_rules(resources.files("condapipe.data").joinpath("diagnoses.yaml").read_text("utf-8"))


def _combined(rules: tuple[Rule, ...]) -> re.Pattern[str]:
    """One alternation of every pattern: a single regex scan per line instead of one per pattern."""
    return re.compile("|".join(f"(?:{p.pattern})" for rule in rules for p in rule.patterns))


def diagnose_lines(lines: Iterable[str], rules: tuple[Rule, ...] | None = None) -> list[Diagnosis]:
    """Every rule that matches some line, in rule priority order (the first is the likeliest cause)."""
    rules = load_rules() if rules is None else rules
    any_rule = _combined(rules) if rules else None
    found: dict[str, Diagnosis] = {}
    for line_no, raw in enumerate(lines, start=1):
        if any_rule is None or not any_rule.search(raw):
            continue
        line = raw.rstrip("\n")
        for rule in rules:
            if rule.id not in found and any(p.search(line) for p in rule.patterns):
                found[rule.id] = Diagnosis(rule.id, rule.title, rule.cause, rule.fix, line_no, line.strip())
        if len(found) == len(rules):
            break
    order = {rule.id: i for i, rule in enumerate(rules)}
    return sorted(found.values(), key=lambda d: order[d.id])


def diagnose_file(path: Path) -> list[Diagnosis]:
    """Diagnose a log file without reading it into memory at once (build logs get huge)."""
    with path.open(encoding="utf-8", errors="replace") as fh:
        return diagnose_lines(fh)


def summary(diagnoses: list[Diagnosis]) -> str | None:
    """The one-line message the CLI prints with a failed build, or None when nothing is known."""
    if not diagnoses:
        return None
    text = diagnoses[0].one_line()
    if len(diagnoses) > 1:
        text += f" (also seen: {', '.join(d.title for d in diagnoses[1:])})"
    return text

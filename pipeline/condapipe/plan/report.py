"""The end of a build: report.json, report.md and a table saying what happened and where it is.

A build that ran for hours must end with the answers a user needs without digging through logs:
which steps ran or were skipped and why, how long each took, which package files were published
(sizes, arch lists, verify results), and the command that installs them. The same facts are
written as JSON for scripts and Markdown for humans (CI job summaries, bug reports).
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from condapipe.errors import UsageError
from condapipe.plan.runner import Plan, PlanResult, StepResult
from condapipe.plan.state import atomic_write_text

REPORT_JSON = "report.json"
REPORT_MD = "report.md"


def _package_entry(result: StepResult, by_id: dict[str, StepResult]) -> list[dict[str, Any]]:
    """Facts about each package a publish step put into the channel."""
    from condapipe.package.io import read_package_info

    label = result.step.package
    verify = by_id.get(f"verify:{label}")
    tests = by_id.get(f"test:{label}")
    verify_data = dict(verify.record.data) if verify and verify.record else {}
    test_data = dict(tests.record.data).get("tests", {}) if tests and tests.record else {}
    entries = []
    for out in result.record.outputs if result.record else ():
        path = Path(out.path)
        report = verify_data.get("verify", {}).get(path.name, {})
        entry: dict[str, Any] = {
            "path": out.path,
            "size": out.size,
            "sha256": out.sha256,
            "archs": verify_data.get("archs"),
            "verify": {
                "ok": report.get("ok"),
                "errors": len(report.get("errors", [])),
                "warnings": len(report.get("warnings", [])),
            },
            "tests": test_data.get(path.name, tests.reason if tests else None),
            "job": label,
        }
        try:
            info = read_package_info(path)
            entry.update(name=info.name, version=info.version, build=info.build, subdir=info.subdir)
        except UsageError:  # gone or unreadable since the run: report what the state recorded
            entry.update(name=path.name, version=None, build=None, subdir=path.parent.name)
        entries.append(entry)
    return entries


def _dependency_flags(channels: Sequence[str] | None) -> list[str]:
    """The `condapipe env` flags that search what the build searched: nothing for the default
    channels (or unknown ones: None), -c for others (a -c list replaces the default, as in the
    build), --offline when the build searched no dependency channel (the --build-tools wheels
    channel holds build tools only)."""
    from condapipe.plan.build_channels import dependency_channels

    if channels is None:
        return []
    deps = [c for c in channels if not c.rstrip("/").endswith("/tool-channel")]
    if not deps:
        return ["--offline"]
    if tuple(deps) == dependency_channels(()):
        return []
    return [w for c in deps for w in ("-c", c)]


def env_hint(channel: Path, names: list[str], channels: Sequence[str] | None = None) -> str:
    """The condapipe command that makes an environment of the built packages and checks them: it
    needs no conda (py-rattler), so it works on every machine that ran the build."""
    if not names:
        return ""
    words = ["condapipe", "env", *sorted(set(names)), "-p", "./env"]
    if channel.resolve() != Path("channel").resolve():
        words += ["--output-dir", str(channel.resolve())]
    return shlex.join([*words, *_dependency_flags(channels)])


def install_hint(
    channel: Path, names: list[str], *, conda: bool | None = None, channels: Sequence[str] | None = None
) -> str:
    """The command that installs the built packages: conda's where conda is on PATH, else
    `condapipe env` (`conda`: whether conda is there; None: look on PATH)."""
    if not names:
        return ""
    if conda is None:
        conda = shutil.which("conda") is not None
    if not conda:
        return env_hint(channel, names, channels)
    return f"conda install -c {channel.resolve().as_uri()} {' '.join(sorted(set(names)))}"


def build_report(
    plan: Plan,
    result: PlanResult | None,
    *,
    error: str | None = None,
    channels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The report as data (what report.json holds); `channels`: the build's dependency channels."""
    results = list(result.results) if result else []
    by_id = {r.step.id: r for r in results}
    details = [
        entry
        for r in results
        if r.step.kind == "publish" and r.status in ("ran", "unchanged")
        for entry in _package_entry(r, by_id)
    ]
    from_channels = [r.reason for r in results if r.step.kind == "publish" and r.status == "skipped"]
    wanted = {s.package for s in plan.steps if not s.skip_reason}
    main = [p for p in details if p["job"] in wanted]
    builds = [r for r in results if r.step.kind == "build" and r.record is not None]
    last_build = dict(builds[-1].record.data) if builds and builds[-1].record else {}
    return {
        "ok": error is None and (result.ok if result else False),
        "error": error,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": round(result.seconds, 3) if result else 0.0,
        "request": dict(plan.request),
        "channel": str(plan.output_dir.resolve()),
        "work_dir": str(plan.work_dir.resolve()),
        "notes": list(plan.notes),
        "steps": [r.to_dict() for r in results],
        "mode": "family" if "package" in plan.request else "recipes",
        "engine": last_build.get("engine"),
        "log": last_build.get("engine_log"),  # the engine log of the last build step
        "packages": [p["path"] for p in main],  # what was asked for, in the channel
        "package_details": details,  # every published package, prerequisites included
        "prerequisites_from_channels": from_channels,
        # outputs the recipe skips on this platform (build/skip): built and published nowhere
        "skipped": [str(name) for r in builds if r.record for name in r.record.data.get("skipped", [])],
        "install": install_hint(plan.output_dir, [p["name"] for p in main], channels=channels),
        "check": env_hint(plan.output_dir, [p["name"] for p in main], channels),
    }


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# condapipe build report — {'OK' if report['ok'] else 'FAILED'}",
        "",
        f"- channel: `{report['channel']}`",
        f"- work dir: `{report['work_dir']}`",
        f"- total: {report['seconds']:.1f} s",
    ]
    if report["error"]:
        lines.append(f"- error: {report['error']}")
    if report["install"]:
        lines.append(f"- install: `{report['install']}`")
    if report.get("check") and report["check"] != report["install"]:
        lines.append(f"- install and check (no conda needed): `{report['check']}`")
    lines += ["", "## Steps", "", "| step | status | seconds | why | log |", "|---|---|---:|---|---|"]
    for s in report["steps"]:
        why = s["error"] or s["reason"]
        lines.append(f"| {s['id']} | {s['status']} | {s['seconds']:.1f} | {why} | {s['log'] or ''} |")
    lines += ["", "## Packages", ""]
    if report["package_details"]:
        lines += ["| file | size | archs | verify | tests |", "|---|---:|---|---|---|"]
        for p in report["package_details"]:
            v = p["verify"]
            verdict = "ok" if v["ok"] else "FAILED" if v["ok"] is False else "?"
            lines.append(
                f"| `{p['path']}` | {_size(p['size'])} | {p['archs'] or '-'} | "
                f"{verdict} ({v['warnings']} warnings) | {p['tests'] or '-'} |"
            )
    else:
        lines.append("none published")
    for name in report.get("skipped", []):
        lines.append(f"- skipped by the recipe (build/skip), nothing published: {name}")
    for note in report["prerequisites_from_channels"] + report["notes"]:
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], work_dir: Path) -> tuple[Path, Path]:
    """report.json and report.md in the work dir (atomic: a reader never sees half a report)."""
    json_path, md_path = work_dir / REPORT_JSON, work_dir / REPORT_MD
    atomic_write_text(json_path, json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    atomic_write_text(md_path, to_markdown(report))
    return json_path, md_path


def _in_channel(path: str, channel: str) -> str:
    """ "linux-64/pytorch-….conda" for a package inside the channel, else the path as given."""
    try:
        return str(Path(path).relative_to(channel))
    except ValueError:
        return path


def _print_packages(report: dict[str, Any], console: Console) -> None:
    """The packages built: a table when the terminal fits the whole file names, else one block per
    package with its name on a line of its own: the file name is what users copy, never cut."""
    rows = [
        (
            _in_channel(p["path"], report["channel"]),
            _size(p["size"]),
            p["archs"] or "-",
            "ok" if p["verify"]["ok"] else "FAILED",
            str(p["tests"] or "-"),
        )
        for p in report["package_details"]
    ]
    title = f"packages (in {report['channel']})"
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    if sum(max(w, 7) for w in widths) + 16 <= console.width:  # 16: the borders and padding of 5 columns
        table = Table(title=title)
        for col in ("package", "size", "archs", "verify", "tests"):
            table.add_column(col, no_wrap=True)
        for row in rows:
            table.add_row(*(Text(c) for c in row))
        console.print(table)
        return
    lines = [f"{title}:"]
    for name, size, archs, verdict, tests in rows:
        lines += [f"  {name}", f"      {size}  verify {verdict}  tests {tests}  archs {archs}"]
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def print_summary(
    report: dict[str, Any],
    console: Console,
    paths: tuple[Path, Path] | None = None,
    *,
    steps_shown: bool = False,
) -> None:
    """The final table: steps (unless the live display left them on the terminal), packages, and
    how to install and check them."""
    verdict = f"condapipe: {'done' if report['ok'] else 'FAILED'} in {report['seconds']:.1f} s"
    if steps_shown:
        console.print(verdict, soft_wrap=True, markup=False, highlight=False)
    else:
        steps = Table(title=verdict)
        for col in ("step", "status", "time", "why"):
            steps.add_column(col, justify="right" if col == "time" else "left", no_wrap=col == "step")
        for s in report["steps"]:
            why = s["error"] or s["reason"]
            steps.add_row(Text(s["id"]), Text(s["status"]), f"{s['seconds']:.1f}s", Text(why))
        console.print(steps)
    if report["package_details"]:
        _print_packages(report, console)
    lines = [f"prerequisite {note}" for note in report["prerequisites_from_channels"]]
    skipped = report.get("skipped", [])
    lines += [f"skipped by the recipe (build/skip), nothing published: {name}" for name in skipped]
    lines.append(f"channel: {report['channel']}")
    if report["install"]:
        lines.append(f"install: {report['install']}")
    if report.get("check") and report["check"] != report["install"]:
        lines.append(f"install and check (no conda needed): {report['check']}")
    if paths:
        lines.append(f"report: {paths[0]} and {paths[1]}")
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)

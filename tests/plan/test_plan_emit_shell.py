"""No value reaches the shell of a generated workflow: `condapipe plan --emit github-actions` passes every
value (spec, channels, cache, owner, pip requirement, variant IDs) as a step's `env:` entry and names
it only as "$NAME" in the `run:` line. Every emitted run line is run here under real bash with hostile
values — command substitution, backticks, `;`, `&&`, pipes, quotes — and nothing executes: the commands
receive each value as one intact argument. Line breaks and `${{` are refused (GitHub would evaluate
or split them), and owners and channels are held to what anaconda.org and conda accept.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from condapipe.cli.main import main
from condapipe.errors import UsageError
from condapipe.plan.emit import CiRequest, emit_github_actions

HOSTILE = [
    "$(touch PWNED1)",
    "`touch PWNED2`",
    "x; touch PWNED3",
    "x' ; touch PWNED4 ; '",
    'x" ; touch PWNED5 ; "',
    "x && touch PWNED6",
    "x | touch PWNED7",
    "$HOME ${PATH} $((1+1))",
    "x > PWNED8",
    "PWNED*",
]
RECORDER = """#!/bin/sh
for a in "$@"; do printf '%s\\0' "$a"; done >> "$ARGV_LOG"
printf '\\n' >> "$ARGV_LOG"
"""


def _bin(tmp: Path) -> Path:
    """`condapipe` and `python` that only record the argv they get (NUL-separated, one call per line)."""
    bindir = tmp / "bin"
    bindir.mkdir()
    for name in ("condapipe", "python"):
        (bindir / name).write_text(RECORDER)
        (bindir / name).chmod(0o755)
    return bindir


def _expr(value: str) -> str:
    return re.sub(r"\$\{\{\s*(secrets|vars)\.(\w+)\s*\}\}", lambda m: f"from-{m.group(1)}", value)


def run_every_step(workflow: str, tmp: Path) -> list[tuple[dict, list[str]]]:
    """Run each `run:` step of the workflow under bash in an empty folder; the argv each step's
    commands received, in order."""
    doc = YAML(typ="safe").load(workflow)
    bindir = _bin(tmp)
    work = tmp / "runner"
    work.mkdir()
    log = tmp / "argv.log"
    seen = []
    for job in doc["jobs"].values():
        for step in job["steps"]:
            if "run" not in step:
                continue
            log.write_bytes(b"")
            env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(work), "ARGV_LOG": str(log)}
            env.update({k: _expr(str(v)) for k, v in step.get("env", {}).items()})
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert proc.returncode == 0, proc.stderr
            for line in log.read_bytes().split(b"\n"):
                if line:
                    seen.append((step, [a.decode() for a in line.split(b"\0")[:-1]]))
    return seen


def _pwned(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("PWNED*"))


def test_hostile_values_given_to_plan_reach_the_jobs_intact_and_run_nothing(tmp_path: Path) -> None:
    src = tmp_path / "$(touch PWNED9) `touch PWNED10`; x"
    src.mkdir()
    argv = ["plan", "magma", "--cuda", "12.4", "--source", str(src), "--emit", "github-actions"]
    for i, value in enumerate(HOSTILE):
        argv += ["--env", f"V{i}={value}", "-c", f"./{value}"]
    argv += ["--install", "condapipe @ file:///w/$(touch PWNED11)", "--upload-channel", "my-org"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    workflow = result.stdout
    runs = [
        s["run"] for j in YAML(typ="safe").load(workflow)["jobs"].values() for s in j["steps"] if "run" in s
    ]
    for value in [*HOSTILE, str(src)]:
        assert not any(value in run for run in runs), value  # values live in env:, never in a run line
    seen = run_every_step(workflow, tmp_path)
    assert _pwned(tmp_path) == []
    (build,) = [args for step, args in seen if step["name"].startswith("Build ")]
    assert build[:2] == ["build", "magma"]
    assert build[build.index("--source") + 1] == str(src)
    assert [build[i + 1] for i, a in enumerate(build) if a == "--env"] == [
        f"V{i}={v}" for i, v in enumerate(HOSTILE)
    ]
    assert [build[i + 1] for i, a in enumerate(build) if a == "--channel"] == [f"./{v}" for v in HOSTILE]
    installs = [args for step, args in seen if step["name"] == "Install condapipe"]
    assert installs and all(
        a == ["-m", "pip", "install", "condapipe @ file:///w/$(touch PWNED11)"] for a in installs
    )


def test_even_values_the_cli_would_refuse_cannot_run_in_an_emitted_step(tmp_path: Path) -> None:
    """The workflow writer does not rely on the CLI's checks: a hostile variant ID, package, owner
    and flag values given to it directly still arrive as single arguments."""
    steps = [SimpleNamespace(package=v, kind="build", skip_reason=None, needs=()) for v in HOSTILE[:3]]
    plan = SimpleNamespace(steps=steps, notes=())
    request = CiRequest(
        package=HOSTILE[0],
        spec_flags=tuple(x for v in HOSTILE for x in ("--version", v)),
        build_flags=("--compile-cache", HOSTILE[1], "--no-test", "--channel", HOSTILE[2]),
        install=HOSTILE[3],
        upload_channel=HOSTILE[4],
    )
    seen = run_every_step(emit_github_actions(plan, request), tmp_path)  # type: ignore[arg-type]
    assert _pwned(tmp_path) == []
    builds = [args for step, args in seen if step["name"].startswith("Build ")]
    assert [b[b.index("--variant") + 1] for b in builds] == HOSTILE[:3]
    assert all(b[1] == HOSTILE[0] and b[b.index("--compile-cache") + 1] == HOSTILE[1] for b in builds)
    assert all([b[i + 1] for i, a in enumerate(b) if a == "--version"] == HOSTILE for b in builds)
    (upload,) = [args for _, args in seen if args[:1] == ["upload"]]
    assert upload[:3] == ["upload", "--channel", HOSTILE[4]]


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "${{ github.token }}"])
def test_line_breaks_and_github_expressions_are_refused(value: str) -> None:
    plan = SimpleNamespace(steps=[SimpleNamespace(package="v", kind="build", skip_reason=None, needs=())])
    with pytest.raises(UsageError, match="cannot go into a CI workflow"):
        emit_github_actions(plan, CiRequest(package="magma", spec_flags=("--env", f"A={value}")))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--upload-channel", "$(touch PWNED)", "not an anaconda.org owner name"),
        ("--upload-channel", "my org", "not an anaconda.org owner name"),
        ("--upload-channel", "-x", "not an anaconda.org owner name"),
        ("-c", "`touch PWNED`", "not a channel name"),
        ("-c", "conda-forge;x", "not a channel name"),
        ("-c", "ftp://host/chan", "unsupported channel URL scheme"),
        ("-c", "https://u:pw@host/chan", "credentials do not belong in a URL"),
        ("-c", "https://conda.anaconda.org/t/tk-123/private", "carries a token"),
        ("--compile-cache", "redis://[::1", "not a valid URL"),
        ("--install", "--index-url=http://evil", "expected a pip requirement"),
    ],
)
def test_owner_channel_and_cache_values_are_checked_at_the_cli(
    tmp_path: Path, flag: str, value: str, message: str
) -> None:
    os.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["plan", "magma", "--cuda", "12.4", "--emit", "github-actions", flag, value]
    )
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "pw@" not in result.stderr and "tk-123" not in result.stderr
    assert _pwned(tmp_path) == []


def test_names_anaconda_org_and_conda_accept_pass(tmp_path: Path) -> None:
    argv = ["plan", "magma", "--cuda", "12.4", "--emit", "json", "--upload-channel", "My_Org.2-x"]
    argv += [
        "-c",
        "conda-forge",
        "-c",
        "pytorch/label/nightly",
        "-c",
        "https://example.org/chan",
        "-c",
        "./local",
    ]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert shlex.join(["My_Org.2-x"]) in result.stdout

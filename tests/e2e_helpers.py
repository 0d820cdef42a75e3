"""Shared helpers for the end-to-end tests: run the real CLI, install with py-rattler, run binaries.

Nothing here is faked: `condapipe build` runs rattler-build with the machine's gcc/cmake/nvcc,
and installs go through py-rattler's solver and installer into a fresh prefix.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from click.testing import CliRunner

from condapipe.cli.main import main


def condapipe(*args: str, cwd: Path) -> tuple[int, str, str]:
    """Run `condapipe ARGS` in-process from `cwd`; returns (exit code, stdout, stderr)."""
    runner = CliRunner()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = runner.invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


def build_json(*args: str, cwd: Path) -> dict:
    """`condapipe build ARGS --json`, asserting success; returns the parsed JSON."""
    code, out, err = condapipe("build", *args, "--json", cwd=cwd)
    assert code == 0, f"condapipe build {' '.join(args)} failed ({code}):\n{err[-3000:]}"
    return json.loads(out)


def install(channel: Path, specs: list[str], prefix: Path, cache: Path) -> list[str]:
    """Solve `specs` against the local `channel` and install them into `prefix` with py-rattler."""
    import rattler

    async def run() -> list[str]:
        records = await rattler.solve(
            [rattler.Channel(str(channel.resolve()))], specs, platforms=["linux-64", "noarch"]
        )
        await rattler.install(records, prefix, cache_dir=cache, show_progress=False)
        return sorted(r.name.normalized for r in records)

    return asyncio.run(run())


def run_clean(argv: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    """Run a program with no LD_LIBRARY_PATH (libraries must be found through the rpath)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, check=False, **kw)


def conda_install(bin_dir: Path, channel: Path, specs: list[str], prefix: Path) -> None:
    """Install `specs` from the local `channel` only into a fresh environment with the real conda
    (`bin_dir`: the `real_conda` fixture's folder)."""
    proc = subprocess.run(
        [str(bin_dir / "conda"), "create", "--yes", "--quiet", "--offline", "--prefix", str(prefix),
         "--override-channels", "-c", channel.resolve().as_uri(), *specs],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def fixed_once(result: dict) -> tuple[str, dict]:
    """The build log's staged-fix line and the fix step's record of a `build --json` result."""
    work = Path(result["work_dir"])
    lines = [
        line
        for log in sorted((work / "logs").glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if "condapipe: staged fix" in line
    ]
    (fix,) = [s for s in result["steps"] if s["kind"] == "fix"]
    (record,) = fix["data"]["fix"].values()
    return (lines[-1] if lines else ""), record

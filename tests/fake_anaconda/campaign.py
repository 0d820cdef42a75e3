"""The upload fault campaign: the real `condapipe upload` process against the fake anaconda.org
behind the fault-injecting proxy, then kill -9 / rerun cycles. Shared by the CI test (small)
and bench/upload_faults.py (200 packages, 5 cycles), which prints the figures.

Phase 1: one run of every package under `probability` injected faults must exit 0 and leave
every file on the server exactly once with the right sha256.
Phase 2: `kill_cycles` runs killed with SIGKILL at seeded random moments (all but the last upload
the packages to a second owner; the last is a --force of rebuilt packages killed right after
the server executed a DELETE, the moment a non-atomic replace would lose the file), each
followed by more runs; the final rerun must exit 0 and the server must hold exactly the
expected files (the rebuilt ones replacing their originals).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from condapipe.package.io import read_package_info
from fake_anaconda.harness import TOKEN
from fake_anaconda.packages import make_package
from fake_anaconda.proxy import FaultProxy, wait_until
from fake_anaconda.server import FakeAnaconda


@dataclass
class CampaignResult:
    packages: int
    faults: dict[str, int] = field(default_factory=dict)
    faults_by_step: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    retries: int = 0
    run_exit: int = -1
    run_seconds: float = 0.0
    kills: list[str] = field(default_factory=list)
    final_exits: list[int] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def _env(home: Path, timeout: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BINSTAR_API_TOKEN", "ANACONDA_API_TOKEN")}
    env.update(
        HOME=str(home),
        BINSTAR_CONFIG_DIR=str(home / ".binstar"),
        ANACONDA_TELEMETRY_ENABLED="false",
        ANACONDA_API_TOKEN=TOKEN,
        NO_PROXY="127.0.0.1",
        CONDAPIPE_UPLOAD_TIMEOUT=str(timeout),
    )
    return env


def _cmd(site: str, owner: str, files: list[Path], *extra: str) -> list[str]:
    exe = shutil.which("condapipe")
    base = [exe] if exe else [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
    return [
        *base,
        "upload",
        "--channel",
        owner,
        "--site-url",
        site,
        "--no-verify",
        "--retries",
        "10",
        "--retry-delay",
        "0.01",
        "--json",
        *extra,
        *map(str, files),
    ]


def check_server(server: FakeAnaconda, owner: str, expected: dict[str, Path]) -> list[str]:
    """Problems with what the server holds for owner (empty: exactly the expected files, once each)."""
    import hashlib

    problems = []
    held = server.files(owner)
    if sorted(held) != sorted(expected):
        missing = sorted(set(expected) - set(held))
        extra = sorted(set(held) - set(expected))
        problems.append(
            f"{owner}: missing {missing[:5]} ({len(missing)}), unexpected {extra[:5]} ({len(extra)})"
        )
    for basename, path in expected.items():
        dist = held.get(basename)
        if dist is None:
            continue
        want = hashlib.sha256(path.read_bytes()).hexdigest()
        if dist.sha256 != want or hashlib.sha256(dist.blob.read_bytes()).hexdigest() != want:
            problems.append(f"{owner}: {basename} has the wrong bytes")
    keys = [k for k in server.dists if k[0] == owner]
    if len(keys) != len(set(keys)):
        problems.append(f"{owner}: a file is there twice")
    return problems


def run_campaign(
    work: Path,
    *,
    packages: int = 200,
    kill_cycles: int = 5,
    probability: float = 0.3,
    seed: int = 14,
    timeout: float = 0.3,
    log=print,
) -> CampaignResult:
    started = time.monotonic()
    rng = random.Random(seed)
    res = CampaignResult(packages)
    out = work / "out"
    files = [
        make_package(out, f"fz{i:03d}", "1.0", payload=f"{i} {seed}\n".encode()) for i in range(packages)
    ]
    n_rebuilt = max(2, packages // 10)
    rebuilt = [
        make_package(work / "rebuilt", f"fz{i:03d}", "1.0", payload=f"rebuilt {i}\n".encode())
        for i in range(n_rebuilt)
    ]
    by_name = {read_package_info(p).basename: p for p in files}
    home = work / "home"
    home.mkdir(exist_ok=True)
    env = _env(home, timeout)
    server = FakeAnaconda(
        work / "server", tokens={TOKEN: "alice"}, orgs={"fuzzorg": {"alice"}, "killorg": {"alice"}}
    )
    server.start()
    host, port = server.url.split("//", 1)[1].split(":")
    # the first requests of the first run are the start-up checks: hit them for sure
    proxy = FaultProxy(
        (host, int(port)),
        probability=probability,
        seed=seed,
        stall_seconds=timeout * 3,
        script=["503", "reset_before", "stall", "lost_reply"],
    )
    proxy.start()
    try:
        # -- phase 1: one run, everything, under faults --------------------------------------
        t0 = time.monotonic()
        run = subprocess.run(
            _cmd(proxy.url, "fuzzorg", files), env=env, cwd=work, capture_output=True, text=True, timeout=1800
        )
        res.run_seconds = time.monotonic() - t0
        res.run_exit = run.returncode
        try:
            report = json.loads(run.stdout)
            res.retries = sum(f["attempts"] - 1 for f in report["files"])
            res.statuses = dict(Counter(f["status"] for f in report["files"]))
            res.problems += [
                f"phase 1: {f['basename']}: {f['detail']}" for f in report["files"] if not f["ok"]
            ]
        except (ValueError, KeyError):
            res.problems.append(f"phase 1: no JSON report (exit {run.returncode}): {run.stderr[-500:]}")
        if run.returncode != 0:
            res.problems.append(f"phase 1 exited {run.returncode}: {run.stderr[-500:]}")
        res.problems += check_server(server, "fuzzorg", by_name)
        log(f"phase 1: exit {run.returncode} in {res.run_seconds:.1f}s, {proxy.requests} requests")

        # -- phase 2: kill -9 / rerun ----------------------------------------------------------
        for cycle in range(1, kill_cycles):
            # between interpreter start-up (about 1.5 s) and most of a full run
            at = rng.uniform(1.5, max(2.0, res.run_seconds * 0.8))
            proc = subprocess.Popen(
                _cmd(proxy.url, "killorg", files),
                env=env,
                cwd=work,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            try:
                proc.wait(timeout=at)
                res.kills.append(f"cycle {cycle}: finished before the kill at {at:.1f}s")
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                held = len(server.files("killorg"))
                res.kills.append(
                    f"cycle {cycle}: SIGKILL at {at:.1f}s ({held}/{packages} files on the server)"
                )
            proc.stdout.close()
            proc.stderr.close()
        final = subprocess.run(
            _cmd(proxy.url, "killorg", files), env=env, cwd=work, capture_output=True, text=True, timeout=1800
        )
        res.final_exits.append(final.returncode)
        res.problems += check_server(server, "killorg", by_name)
        if kill_cycles:
            # the --force cycle: kill right after the server executed a DELETE of an old file
            before = len(server.requests)

            def deleted() -> bool:
                return any(
                    r.method == "DELETE" and r.path.startswith("/dist/") and r.status != 0
                    for r in server.requests[before:]
                )

            proc = subprocess.Popen(
                _cmd(proxy.url, "killorg", rebuilt, "--force"),
                env=env,
                cwd=work,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            if wait_until(deleted, 600):
                time.sleep(rng.uniform(0, 0.05))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
            gone = [
                b
                for b in (read_package_info(p).basename for p in rebuilt)
                if b not in server.files("killorg")
            ]
            res.kills.append(
                f"cycle {kill_cycles} (--force): SIGKILL after a DELETE; {len(gone)} name(s) empty"
            )
            forced = subprocess.run(
                _cmd(proxy.url, "killorg", rebuilt, "--force"),
                env=env,
                cwd=work,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            res.final_exits.append(forced.returncode)
            expected = dict(by_name)
            expected.update({read_package_info(p).basename: p for p in rebuilt})
            res.problems += check_server(server, "killorg", expected)
            try:
                statuses = Counter(f["status"] for f in json.loads(forced.stdout)["files"])
                res.kills.append(f"rerun --force: exit {forced.returncode}, {dict(statuses)}")
            except (ValueError, KeyError):
                res.problems.append(f"rerun --force: no JSON report: {forced.stderr[-300:]}")
        if any(res.final_exits):
            res.problems.append(f"final reruns exited {res.final_exits}")
    finally:
        proxy.stop()
        server.stop()
    res.faults = proxy.counts()
    res.faults_by_step = dict(Counter(f"{i.kind}@{i.step}" for i in proxy.injected))
    res.requests = proxy.requests
    res.wall_seconds = time.monotonic() - started
    return res

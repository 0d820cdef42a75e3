"""Benchmark: upload a ~2 GB package to the local fake anaconda.org and report peak RSS and time.

Not a test (too slow for CI): it proves `condapipe upload` streams files instead of reading them
into memory, the failure mode that matters for 1-2 GB pytorch packages.

    python bench/upload_stream_2gb.py [--size-mib 2048] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fake_anaconda import FakeAnaconda, make_package
from fake_anaconda.harness import TOKEN, assert_holds_exactly

RUNNER = """
import atexit, os, resource, sys
def _peak():
    with open(os.environ["RSS_OUT"], "w") as fh:
        fh.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
atexit.register(_peak)
from condapipe.cli.main import main
sys.argv = ["condapipe", *sys.argv[1:]]
main()
"""


def run_upload(args: list[str], tmp: Path) -> tuple[float, int]:
    """Run condapipe in a child process; return (seconds, peak RSS in KiB)."""
    rss_out = tmp / "rss"
    env = dict(os.environ, ANACONDA_API_TOKEN=TOKEN, RSS_OUT=str(rss_out))
    start = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-c", RUNNER, *args], env=env, cwd=tmp, capture_output=True, text=True
    )
    took = time.monotonic() - start
    if res.returncode != 0:
        raise SystemExit(f"upload failed: {res.stderr[-2000:]}")
    return took, int(rss_out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    opts = parser.parse_args()
    tmp = opts.keep or Path(tempfile.mkdtemp(prefix="condapipe-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        start = time.monotonic()
        small = make_package(tmp / "out", "small", "1.0")
        big = make_package(tmp / "out", "big", "1.0", payload_size=opts.size_mib << 20)
        print(f"made {big.name}: {big.stat().st_size / 2**20:.0f} MiB in {time.monotonic() - start:.1f} s")
        with FakeAnaconda(tmp / "server", tokens={TOKEN: "alice"}, orgs={"myorg": {"alice"}}) as server:
            base = ["upload", "--channel", "myorg", "--site-url", server.url]
            t_small, rss_small = run_upload([*base, "--no-verify", str(small)], tmp)
            t_big, rss_big = run_upload([*base, "--no-verify", str(big)], tmp)
            assert_holds_exactly(
                server, "myorg", {"noarch/small-1.0-0.conda": small, "noarch/big-1.0-0.conda": big}
            )
        t_local, rss_local = run_upload(
            ["upload", "--to", str(tmp / "channel"), "--no-verify", str(big)], tmp
        )
        mib = big.stat().st_size / 2**20
        print(f"anaconda.org (fake) tiny file : {t_small:6.1f} s, peak RSS {rss_small / 1024:6.0f} MiB")
        print(
            f"anaconda.org (fake) {mib:.0f} MiB  : {t_big:6.1f} s, peak RSS {rss_big / 1024:6.0f} MiB "
            f"({mib / t_big:.0f} MiB/s incl. hashing)"
        )
        print(f"local channel       {mib:.0f} MiB  : {t_local:6.1f} s, peak RSS {rss_local / 1024:6.0f} MiB")
    finally:
        if not opts.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

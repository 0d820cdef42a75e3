"""Large files are streamed: uploading a 50 MB package costs far less than 50 MB of memory.

(The 2 GB check is a benchmark, bench/upload_stream_2gb.py, not a test.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fake_anaconda import FakeAnaconda, make_package
from fake_anaconda.harness import TOKEN, assert_holds_exactly

# VmHWM: the peak of this process's own memory since exec (ru_maxrss would also carry the forking
# test process's high-water mark over exec: over 1 GiB on a whole-suite run).
RSS_RUNNER = """
import atexit, os, re, sys
def _peak():
    status = open("/proc/self/status").read()
    with open(os.environ["RSS_OUT"], "w") as fh:
        fh.write(re.search(r"VmHWM:\\s*(\\d+) kB", status).group(1))
atexit.register(_peak)
from condapipe.cli.main import main
sys.argv = ["condapipe", *sys.argv[1:]]
main()
"""


def _upload_peak_rss_kib(server: FakeAnaconda, pkg: Path, tmp: Path) -> int:
    rss_out = tmp / f"{pkg.name}.rss"
    env = {k: v for k, v in os.environ.items() if k not in ("BINSTAR_API_TOKEN",)}
    env.update(ANACONDA_API_TOKEN=TOKEN, HOME=str(tmp), RSS_OUT=str(rss_out))
    args = ["upload", "--channel", "myorg", "--site-url", server.url, "--no-verify", str(pkg)]
    res = subprocess.run(
        [sys.executable, "-c", RSS_RUNNER, *args], env=env, cwd=tmp, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return int(rss_out.read_text())


def test_a_50mb_upload_streams_with_flat_memory(tmp_path):
    small = make_package(tmp_path / "out", "small", "1.0")
    big = make_package(tmp_path / "out", "big", "1.0", payload_size=50 << 20)
    assert big.stat().st_size > 50 << 20
    with FakeAnaconda(tmp_path / "server", tokens={TOKEN: "alice"}, orgs={"myorg": {"alice"}}) as server:
        baseline = _upload_peak_rss_kib(server, small, tmp_path)
        peak = _upload_peak_rss_kib(server, big, tmp_path)
        assert_holds_exactly(
            server, "myorg", {"noarch/small-1.0-0.conda": small, "noarch/big-1.0-0.conda": big}
        )
    assert peak - baseline < 20 * 1024, f"peak RSS grew by {(peak - baseline) // 1024} MiB for a 50 MiB file"

"""Build-log throughput: how fast condapipe keeps (and echoes) a build log, and diagnoses it.

A PyTorch CUDA build prints ~100k-500k lines over hours; keeping and diagnosing them must not
add minutes. Run: python bench/log_bench.py [LINES]
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from condapipe.cli.output import echo_lines
from condapipe.engines.diagnose import diagnose_file
from condapipe.engines.logs import BuildLog

LINE = "[1234/5485] Building CUDA object caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/F.cu.o"


def main(lines: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for echo in (False, True):
            path = Path(tmp) / f"echo-{echo}.log"
            console = Console(file=io.StringIO(), highlight=False)
            start = time.perf_counter()
            with BuildLog(path, echo=echo_lines(console) if echo else None) as log:
                for _ in range(lines):
                    log.write(LINE)
            seconds = time.perf_counter() - start
            print(f"log {lines} lines, echo={echo}: {seconds:.2f} s ({lines / seconds:,.0f} lines/s)")
        with path.open("a") as fh:
            fh.write("g++: fatal error: Killed signal terminated program cc1plus\n")
        start = time.perf_counter()
        found = diagnose_file(path)
        seconds = time.perf_counter() - start
        size = path.stat().st_size / 1e6
        ids = [d.id for d in found]
        print(f"diagnose {size:.1f} MB: {seconds:.2f} s ({size / seconds:.1f} MB/s) -> {ids}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)

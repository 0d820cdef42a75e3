"""Keep this machine busy while a test command runs: a spinning loop per core and a parallel compile.

Usage: python scripts/busy_machine.py -- COMMAND...   (exit status: the command's)

The interrupt, signal and terminal tests must pass on a loaded 2-core machine (issue 34 item 5):
run them under this to see that every timing holds when the cores are taken. The load is one
busy-looping process per core (as os.sched_getaffinity counts them) and a compile of a generated
C file at -O2 run over and over with -j cores, all at the command's own priority; it ends with the
command. Prints the load average at the start and the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

_SPIN = "while True: pass"
_C_FUNCTIONS = 4000  # a few seconds of cc1 per file at -O2: long enough to overlap every test step


def _compile_loop(folder: Path, jobs: int) -> list[str]:
    source = folder / "busy.c"
    source.write_text(
        "".join(f"int f{i}(int x) {{ int s = 0; for (int j = 0; j < x; j++) s += j * {i}; return s; }}\n"
                for i in range(_C_FUNCTIONS)),
        encoding="utf-8",
    )  # fmt: skip
    makefile = folder / "Makefile"
    objects = " ".join(f"o{i}.o" for i in range(jobs))
    makefile.write_text(
        f"all: {objects}\n" + "".join(f"o{i}.o: busy.c\n\tgcc -O2 -c $< -o $@\n" for i in range(jobs)),
        encoding="utf-8",
    )
    return ["sh", "-c", f"while true; do make -s -B -C {folder} -j{jobs} >/dev/null 2>&1; done"]


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: busy_machine.py -- COMMAND...", file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1 :]
    cores = len(os.sched_getaffinity(0))
    load: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="busy-machine-") as tmp:
        try:
            load += [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(cores)]
            load.append(subprocess.Popen(_compile_loop(Path(tmp), cores), start_new_session=True))
            what = f"{cores} spinning + make -j{cores}"
            print(f"busy_machine: {what}; load {os.getloadavg()[0]:.1f}", flush=True)
            code = subprocess.call(command)
            print(f"busy_machine: load at the end {os.getloadavg()[0]:.1f}", flush=True)
            return code
        finally:
            for proc in load:
                if proc.args and proc.args[0] == "sh":
                    os.killpg(proc.pid, signal.SIGKILL)  # the loop and the make/gcc it runs
                else:
                    proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv))

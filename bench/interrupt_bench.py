"""How a real compile follows condapipe: gone seconds after `kill -9` of condapipe, paused by Ctrl-Z.

Usage: python bench/interrupt_bench.py [--files N]

Builds a rattler-build recipe whose ninja -j2 compiles N generated C files at -O2 (each tens of
seconds of cc1), and prints:
  - kill -9: seconds from SIGKILL of condapipe until no process of the build (engine, bash, ninja,
    gcc, cc1) is left, and how many there were;
  - Ctrl-Z typed into `bash -i` on a pty: the cc1 CPU ticks (utime+stime) over 3 s while the job is
    stopped (0 when every compiler is paused) and over 3 s after `fg`;
  - Ctrl-C typed after that: seconds until the shell has its prompt back and no process is left.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from build_processes import (
    Terminal,
    all_pids,
    build_argv,
    cmdline,
    compilers,
    engine_of,
    in_session,
    kill_session,
    stat,
    state,
    wait_for,
)


def heavy_recipe(root: Path, files: int) -> Path:
    src = root / "src"
    src.mkdir()
    body = "".join(
        f"double f{i}(double x) {{ double s = 0; for (int j = 0; j < (int)x; j++) s += j * {i}.5 / (x + j);"
        " return s; }\n"
        for i in range(6000)
    )
    names = [f"u{n}" for n in range(files)]
    for name in names:
        (src / f"{name}.c").write_text(body)
    (src / "build.ninja").write_text(
        "rule cc\n  command = gcc -O2 -c $in -o $out\n" + "".join(f"build {n}.o: cc {n}.c\n" for n in names)
    )
    recipe = root / "heavy"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(
        "package:\n  name: heavy\n  version: '1.0'\n"
        "build:\n  number: 0\n  script:\n"
        f"    - cp {src}/* .\n"
        "    - ninja -j 2\n"
        "    - mkdir -p $PREFIX/share/heavy && cp *.o $PREFIX/share/heavy/\n",
        encoding="utf-8",
    )
    return recipe


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        fields = stat(pid)
        if fields:
            total += int(fields[11]) + int(fields[12])
    return total


def running_compile(condapipe: int) -> tuple[int, list[int]]:
    found: dict[str, object] = {}

    def two_cc1() -> bool:
        engine = engine_of(condapipe)
        if engine is None:
            return False
        found["s"], found["cc1"] = engine, compilers(engine)
        return len(found["cc1"]) == 2  # type: ignore[arg-type]

    wait_for("the compile never started", two_cc1, 600)
    return int(found["s"]), list(found["cc1"])  # type: ignore[call-overload]


def kill_9(root: Path, recipe: Path) -> None:
    project = root / "p-kill"
    project.mkdir()
    proc = subprocess.Popen(
        build_argv(recipe),
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    session, _ = running_compile(proc.pid)
    time.sleep(2)
    count = len(in_session(session))
    start = time.monotonic()
    proc.kill()
    proc.wait()
    wait_for("the build outlived condapipe", lambda: not in_session(session), 600)
    print(f"kill -9 of condapipe: {count} build processes gone in {time.monotonic() - start:.2f} s")


def ctrl_z(root: Path, recipe: Path) -> None:
    project = root / "p-tstp"
    project.mkdir()
    term = Terminal(project)
    session = 0
    try:
        wait_for("bash never prompted", lambda: "$ " in term.text)
        term.type(f"{shlex.join(build_argv(recipe))}\n".encode())

        def condapipe() -> int | None:
            for pid in all_pids():
                f = stat(pid)
                if f and int(f[1]) == term.shell.pid and "condapipe.cli.main" in cmdline(pid):
                    return pid
            return None

        wait_for("no condapipe", lambda: condapipe() is not None)
        session, cc1 = running_compile(condapipe() or 0)
        time.sleep(2)
        term.type(b"\x1a")
        wait_for("not stopped", lambda: all(state(p) == "T" for p in in_session(session)), 120)
        before = cpu_ticks(cc1)
        time.sleep(3)
        paused = cpu_ticks(cc1) - before
        term.type(b"fg\n")
        wait_for("not resumed", lambda: not any(state(p) == "T" for p in in_session(session)), 120)
        before = cpu_ticks(cc1)
        time.sleep(3)
        resumed = cpu_ticks(cc1) - before
        hz = os.sysconf("SC_CLK_TCK")
        print(f"Ctrl-Z: 2 cc1 used {paused / hz:.2f} CPU-s in 3 s while stopped,", end=" ")
        print(f"{resumed / hz:.2f} CPU-s in 3 s after fg")
        prompts = term.text.count("$ ")
        start = time.monotonic()
        term.type(b"\x03")
        wait_for("Ctrl-C did not end the build", lambda: not in_session(session), 600)
        wait_for("no prompt after Ctrl-C", lambda: term.text.count("$ ") > prompts, 600)
        print(f"Ctrl-C: build gone and prompt back in {time.monotonic() - start:.2f} s")
    finally:
        if session:
            kill_session(session)
        term.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="interrupt-bench-") as tmp:
        root = Path(tmp)
        recipe = heavy_recipe(root, args.files)
        print(f"machine: {len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}")
        kill_9(root, recipe)
        ctrl_z(root, recipe)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A real compile a test can hold at will, and what the tests read of a build's processes in /proc.

The recipe's script runs `ninja -j 2` on two C files; each includes a FIFO (a "gate"), so both
gcc's cc1 sit inside their compile, as ninja started them (each in a process group of its own),
until the test opens the gates. Nothing depends on how fast this machine is: a test waits for the
state it needs, with generous ceilings, and lets the compile finish when it chooses.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat as stat_mod
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
GATES = ("a", "b")
# Ceilings: a rattler-build start (environment resolution, a Python import of the engine) takes a
# few seconds alone and minutes on a loaded 2-core machine; a real hang still ends the test.
START_S = 300.0
SETTLE_S = 60.0


def compile_recipe(root: Path, engine: str = "rattler-build") -> tuple[Path, dict[str, Path]]:
    """The recipe folder and its gate FIFOs (by name). Each gate, once opened and written, gives
    its C file a function; the package installs both objects."""
    src = root / "src"
    src.mkdir()
    gates = {}
    for name in GATES:
        gate = root / f"gate_{name}"
        os.mkfifo(gate)
        gates[name] = gate
        body = f"int use_{name}(void) {{ return gated_{name}(); }}\n"
        (src / f"{name}.c").write_text(f'#include "{gate}"\n{body}')
    (src / "build.ninja").write_text(
        "rule cc\n  command = gcc -O1 -c $in -o $out\n" + "".join(f"build {n}.o: cc {n}.c\n" for n in GATES)
    )
    recipe = root / "compiling"
    recipe.mkdir()
    install = "mkdir -p $PREFIX/share/compiling && cp a.o b.o $PREFIX/share/compiling/"
    script = [f"cp {src}/* .", "ninja -j 2", install]
    if engine == "conda-build":
        (recipe / "meta.yaml").write_text(
            "package:\n  name: compiling\n  version: '1.0'\nbuild:\n  number: 0\n"
            f"  script: {' && '.join(script)}\n",
            encoding="utf-8",
        )
    else:
        (recipe / "recipe.yaml").write_text(
            "package:\n  name: compiling\n  version: '1.0'\nbuild:\n  number: 0\n  script:\n"
            + "".join(f"    - {line}\n" for line in script),
            encoding="utf-8",
        )
    return recipe, gates


def open_gates(gates: dict[str, Path], readers_s: float = 0.0) -> None:
    """Let both compiles finish: each cc1 reads its function from its gate.

    A compile waiting in its gate's open() counts as the FIFO's reader; one stopped (Ctrl-Z) does
    not, nor one just continued until it has restarted that open() from the path. A gate replaced
    in that moment keeps the compile waiting for good on the FIFO it found, so a caller whose
    compiles are alive gives `readers_s`: each gate is written once its compile is there. A gate
    nobody comes to read within that becomes a plain file, for a compile still to come (renamed
    into place: an open() finds the FIFO or the whole file, never no file or half of one)."""
    for name, gate in gates.items():
        text = f"static int gated_{name}(void) {{ return 1; }}\n".encode()
        deadline = time.monotonic() + readers_s
        while True:
            try:
                fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:  # ENXIO: no reader (yet)
                if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                    fd = -1
                    break
                time.sleep(0.01)
        if fd < 0:
            plain = gate.with_name(f"{gate.name}.plain")
            plain.write_bytes(text)
            os.replace(plain, gate)
            continue
        os.set_blocking(fd, True)
        os.write(fd, text)
        os.close(fd)


def build_argv(recipe: Path, engine: str = "rattler-build") -> list[str]:
    return [*CLI, "build", str(recipe), "--engine", engine, "--no-test"]


def stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first); None once gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields


def state(pid: int) -> str:
    fields = stat(pid)
    return fields[0] if fields else "gone"


def alive(pid: int) -> bool:
    return stat(pid) is not None


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def all_pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


def in_session(session: int) -> list[int]:
    """Live processes of `session`."""
    return [pid for pid in all_pids() if (f := stat(pid)) is not None and int(f[3]) == session]


def engine_of(condapipe_pid: int) -> int | None:
    """The engine process a condapipe started (rattler-build's child, `conda build`), if running:
    the child of condapipe that leads a session of its own, other than the interrupt watcher."""
    for pid in all_pids():
        f = stat(pid)
        if f and int(f[1]) == condapipe_pid and int(f[3]) == pid and "interrupt_watch.py" not in cmdline(pid):
            return pid
    return None


def watcher_of(condapipe_pid: int) -> int | None:
    """The interrupt watcher condapipe started, if running."""
    for pid in all_pids():
        f = stat(pid)
        if f and int(f[1]) == condapipe_pid and "interrupt_watch.py" in cmdline(pid):
            return pid
    return None


def compilers(session: int) -> list[int]:
    return [pid for pid in in_session(session) if comm(pid) == "cc1"]


def wait_for(
    what: str, check: Callable[[], bool], seconds: float = SETTLE_S, explain: Callable[[], str] | None = None
) -> float:
    """Poll `check` until true; fail naming `what` after `seconds`, followed by what `explain` says
    of the moment it gave up. Returns the seconds it took."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start >= seconds:
            raise AssertionError(f"{what} (after {seconds:.0f}s)" + (f"\n{explain()}" if explain else ""))
        time.sleep(0.05)
    return time.monotonic() - start


def compiling(condapipe_pid: int, seconds: float = START_S) -> tuple[int, list[int]]:
    """Wait until both compiles of the condapipe build run; returns the engine's session and the
    two cc1 PIDs."""
    found: dict[str, object] = {}

    def both_compile() -> bool:
        assert alive(condapipe_pid), "condapipe ended before the compile started"
        engine = engine_of(condapipe_pid)
        if engine is None:
            return False
        found["session"], found["cc1"] = engine, compilers(engine)
        return len(found["cc1"]) == 2  # type: ignore[arg-type]

    wait_for("the two compiles never started", both_compile, seconds)
    return int(found["session"]), list(found["cc1"])  # type: ignore[call-overload]


def wchan(pid: int) -> str:
    """The kernel function a sleeping process waits in (`pipe_read`, `do_signal_stop`), "0" when running."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip() or "-"
    except OSError:
        return "?"


def open_files(pid: int, most: int = 12) -> str:
    """`fd=target` of a process's open files (a FIFO unlinked under a reader reads `(deleted)`)."""
    try:
        fds = sorted(os.listdir(f"/proc/{pid}/fd"), key=int)
    except OSError:
        return "?"
    shown = []
    for fd in fds[:most]:
        with contextlib.suppress(OSError):
            shown.append(f"{fd}={os.readlink(f'/proc/{pid}/fd/{fd}')}")
    return " ".join(shown) + (f" (+{len(fds) - most} more)" if len(fds) > most else "")


def process_report(roots: list[int], sessions: list[int]) -> str:
    """One line per process of `roots`, their descendants and every process of `sessions`: pid,
    parent, state, wchan, command line and open files, for a test that gives up waiting to say
    what the build was doing."""
    parents: dict[int, int] = {}
    sessions_of: dict[int, int] = {}
    for pid in all_pids():
        fields = stat(pid)
        if fields:
            parents[pid], sessions_of[pid] = int(fields[1]), int(fields[3])
    chosen = [pid for pid in roots if pid in parents]
    todo = list(chosen)
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in chosen:
                chosen.append(pid)
                todo.append(pid)
    chosen += [pid for pid, session in sessions_of.items() if session in sessions and pid not in chosen]
    lines = [f"processes of {roots} (and below) and of session(s) {sessions}: {len(chosen)}"]
    for pid in chosen:
        lines.append(
            f"  {pid} ppid={parents.get(pid)} sid={sessions_of.get(pid)} state={state(pid)} "
            f"wchan={wchan(pid)} cmd={cmdline(pid)[:200]!r} fds: {open_files(pid)}"
        )
    gone = [pid for pid in roots if pid not in parents]
    if gone:
        lines.append(f"  gone (or zombies): {gone}")
    return "\n".join(lines)


def gate_kinds(gates: dict[str, Path]) -> str:
    """`a=fifo b=file`: which gates are still FIFOs (a compile may wait on them) and which were
    replaced by plain files."""
    kinds = []
    for name, gate in gates.items():
        try:
            kinds.append(f"{name}={'fifo' if stat_mod.S_ISFIFO(gate.lstat().st_mode) else 'file'}")
        except OSError:
            kinds.append(f"{name}=missing")
    return " ".join(kinds)


def kill_session(session: int) -> None:
    """What a failed test left of a build: killed."""
    for pid in in_session(session):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Terminal:
    """`bash -i` on a pseudo-terminal it owns; everything it prints is collected."""

    def __init__(self, cwd: Path) -> None:
        master, slave = os.openpty()
        self.master = master
        self.shell = subprocess.Popen(
            ["bash", "--norc", "--noprofile", "-i"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**os.environ, "PS1": "$ ", "TERM": "dumb"},
            start_new_session=True,
            preexec_fn=self._as_a_login_terminal,
        )
        os.close(slave)
        self._out = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @staticmethod
    def _as_a_login_terminal() -> None:
        """In the new session: the pty becomes the controlling terminal, and the signals a test
        runner may ignore (nohup's SIGHUP, a background job's SIGINT) are at their defaults, as
        for a shell a terminal starts."""
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        for sig in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
            signal.signal(sig, signal.SIG_DFL)

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: every process holding the terminal is gone
                return
            if not chunk:
                return
            self._out += chunk

    @property
    def text(self) -> str:
        return bytes(self._out).decode(errors="replace")

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        if self.shell.poll() is None:
            with contextlib.suppress(OSError):
                self.type(b"exit\n")
            try:
                self.shell.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.shell.kill()
                self.shell.wait()
        os.close(self.master)

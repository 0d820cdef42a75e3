"""A rerun continues the compile (issue 34, items 3 and 4).

A long build stopped midway (Ctrl-C, SIGTERM, kill -9 of every process of the build as a reboot or
a lost machine would) keeps every object it finished: a build whose script takes CONDAPIPE_COMPILE_CACHE
gets a ccache directory under the work dir by default (magma and PyTorch do), and the rerun says it
continues the unfinished run and compiles only the objects the stopped run had not. A changed patch
recompiles the one object it changes; a changed flag recompiles every object whose compile it
changes (ccache keys by the arguments and the preprocessed source). While it
builds, a redirected log gets a short progress line every few seconds (elapsed time, ninja's
[n/N], an estimate) and the log path from the step's first second; a terminal gets the live table.

Real builds: tests/data/recipes/ninja-objects (CMake + ninja, 26 C objects with the machine's gcc)
through the real CLI in a child process, rattler-build, the machine's ccache.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("cmake", "ninja", "gcc", "ccache")),
        reason="needs cmake, ninja, gcc and ccache",
    ),
]

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
RECIPE = Path(__file__).parent.parent / "data" / "recipes" / "ninja-objects"
OBJECTS = 26  # 24 generated units + extra.c + main.c: each one compile through ccache
STEPS = 27  # ninja's N: the objects and the link
EVERY = "2"  # seconds between progress lines in a redirected log (CONDAPIPE_PROGRESS_EVERY)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


def _recipe(tmp_path: Path) -> Path:
    recipe = tmp_path / "ninja-objects"
    shutil.copytree(RECIPE, recipe)
    return recipe


def _argv(recipe: Path) -> list[str]:
    return [*CLI, "build", str(recipe), "--engine", "rattler-build", "--no-test"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CONDAPIPE_COMPILE_CACHE"}
    env["CONDAPIPE_PROGRESS_EVERY"] = EVERY
    return env


def _as_a_terminal_job() -> None:
    """A terminal's foreground job gets SIGINT's default action even where this test runs with it
    ignored (a job a non-interactive shell put in the background inherits SIG_IGN)."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _cache_stats(project: Path) -> dict[str, int]:
    """ccache's own counters of the kept cache (what was compiled and stored)."""
    proc = subprocess.run(
        ["ccache", "--print-stats"],
        env={**os.environ, "CCACHE_DIR": str(project / ".condapipe" / "compile-cache" / "ninja-objects")},
        capture_output=True,
        text=True,
        check=True,
    )
    return {k: int(v) for k, v in (line.split("\t")[:2] for line in proc.stdout.splitlines() if "\t" in line)}


def _build_stats(err: str) -> dict[str, int]:
    """The ccache statistics the recipe prints at the end of its build (this build only)."""
    found = dict(re.findall(r"ccache-stats (\w+)\s+(\d+)", err))
    assert found, err[-3000:]
    return {k: int(v) for k, v in found.items()}


def _compiled_so_far(text: str) -> int:
    done = [int(n) for n in re.findall(rf"\[(\d+)/{STEPS}\]", text)]
    return max(done, default=0)


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process now."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[int(entry.name)] = (int(fields[1]), fields[0])
    return found


def _tree(root: int) -> list[int]:
    """`root` and every process below it, whatever session or group the engine put them in."""
    table, tree = _processes(), [root]
    for pid in tree:
        tree += [child for child, (parent, _) in table.items() if parent == pid and child not in tree]
    return tree


def _all_gone(pids: list[int], seconds: float = 60) -> None:
    """Wait until none of the stopped build's processes is left (then nothing can store more)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        table = _processes()
        left = [p for p in pids if p in table and table[p][1] != "Z"]
        if not left:
            return
        time.sleep(0.5)
    pytest.fail(f"processes of the stopped build still run: {left}")


def _stop_midway(project: Path, recipe: Path, how: str, err_file: Path) -> int:
    """Start the build, stop it once a third of its objects are compiled; the objects it finished."""
    with err_file.open("w") as err:
        proc = subprocess.Popen(
            _argv(recipe),
            cwd=project,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            env=_env(),
            start_new_session=True,
            preexec_fn=_as_a_terminal_job,
        )
        deadline = time.monotonic() + 600
        while _compiled_so_far(err_file.read_text()) < OBJECTS // 3:
            assert proc.poll() is None, err_file.read_text()[-3000:]
            assert time.monotonic() < deadline, "the build never got a third of the way"
            time.sleep(0.2)
        build = _tree(proc.pid)
        if how == "kill-9-of-everything":  # a reboot, a lost machine: every process dies at once
            for pid in build:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        else:
            proc.send_signal(getattr(signal, how))
        proc.wait(timeout=120)
    _all_gone(build)
    if how != "kill-9-of-everything":
        assert proc.returncode == 130, err_file.read_text()[-3000:]
    stored = _cache_stats(project).get("cache_miss", 0)
    assert 1 <= stored < OBJECTS, f"stopped with {stored} of {OBJECTS} objects compiled"
    return stored


def _rerun(project: Path, recipe: Path) -> str:
    proc = subprocess.run(_argv(recipe), cwd=project, capture_output=True, text=True, env=_env(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "kill-9-of-everything"])
def test_a_build_stopped_midway_continues_and_compiles_only_what_it_had_not(tmp_path: Path, how: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    recipe = _recipe(tmp_path)
    first = tmp_path / "first.err"
    stored = _stop_midway(project, recipe, how, first)
    assert "compile cache: " in first.read_text()  # said where the kept cache is, and how it goes
    assert "condapipe clean --caches" in first.read_text()

    err = _rerun(project, recipe)

    assert "build:ninja-objects: build ninja-objects with rattler-build (continues an unfinished run" in err
    assert "not done before" not in err.split("▶ build:", 1)[1].split("\n", 1)[0]
    stats = _build_stats(err)
    # Every object the stopped run finished is a hit; only the rest is compiled.
    assert stats["direct_cache_hit"] + stats["preprocessed_cache_hit"] == stored
    assert stats["cache_miss"] == OBJECTS - stored
    assert list(project.glob("channel/linux-64/ninja-objects-1.0.0-*.conda"))
    assert not (project / ".condapipe" / "started" / "build_ninja-objects.json").exists()


def test_a_changed_patch_recompiles_its_object_and_a_changed_flag_recompiles_all(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    recipe = _recipe(tmp_path)
    cold = _build_stats(_rerun(project, recipe))
    assert cold["cache_miss"] == OBJECTS

    patch = recipe / "units.patch"
    patch.write_text(patch.read_text().replace("return 2u;", "return 3u;"))
    err = _rerun(project, recipe)
    assert "inputs changed" in err
    after_patch = _build_stats(err)
    assert after_patch["cache_miss"] == 1  # extra.c, the file the patch changes
    assert after_patch["direct_cache_hit"] + after_patch["preprocessed_cache_hit"] == OBJECTS - 1

    text = (recipe / "recipe.yaml").read_text()
    (recipe / "recipe.yaml").write_text(text.replace("-DUNIT_SCALE=1", "-DUNIT_SCALE=2"))
    after_flag = _build_stats(_rerun(project, recipe))
    # Every object is compiled with -DUNIT_SCALE=2 now; the 24 units that use it are compiled again,
    # extra.c and main.c, which do not, preprocess to the same text as before and are hits.
    assert after_flag["cache_miss"] == OBJECTS - 2
    assert after_flag["direct_cache_hit"] == 0
    assert after_flag["preprocessed_cache_hit"] == 2


def test_a_redirected_log_gets_short_progress_lines_and_the_log_path_at_once(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    recipe = _recipe(tmp_path)
    err = _rerun(project, recipe)

    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("▶ build:ninja-objects"))
    # The step's own log right away, the engine's as soon as it opens (before any build output).
    assert lines[start + 1] == f"  log: {project / '.condapipe' / 'logs' / 'build_ninja-objects.log'}"
    engine_log = lines[start + 2]
    assert re.fullmatch(r"  log: .*/\.condapipe/logs/ninja-objects-rattler-build-[\d-]+\.log", engine_log)
    assert Path(engine_log.split("log: ", 1)[1]).is_file()

    beats = [line for line in lines if line.startswith("… build:ninja-objects running ")]
    assert len(beats) >= 3, err[-3000:]
    seconds = [int(m.group(1)) for m in (re.search(r"running (\d+)s", b) for b in beats) if m]
    assert seconds == sorted(seconds) and seconds[-1] > seconds[0]  # the time moves
    counted = [b for b in beats if re.search(rf"compile \[\d+/{STEPS}\] \d+%", b)]
    assert counted, beats  # ninja's own progress
    assert any(re.search(r"~\d+(m\d\ds|s) left", b) for b in beats), beats  # and an estimate
    assert max(len(b) for b in beats) <= 100  # lines of normal width


def test_a_terminal_shows_the_time_moving_the_compile_count_and_the_log(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    recipe = _recipe(tmp_path)
    main, child = pty.openpty()
    env = {**_env(), "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"}
    proc = subprocess.Popen(
        _argv(recipe), cwd=project, stdin=child, stdout=child, stderr=child, env=env, start_new_session=True
    )
    os.close(child)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 1)
        if ready:
            try:
                data = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(main)
    assert proc.wait(timeout=60) == 0
    screen = _ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace"))

    # The running row's time column, redrawn twice a second: it takes several values.
    times = re.findall(r"build:ninja-objects\s*│\s*running\s*│\s*(\d+)s\s*│", screen)
    assert len(set(times)) >= 3, screen[-3000:]
    assert re.search(rf"running\s*│\s*\d+s\s*│\s*\[\d+/{STEPS}\] \d+%", screen), screen[-3000:]
    assert re.search(r"~\d+(m\d\ds|s) left", screen)
    assert "build:ninja-objects log: " in screen

"""The rattler-build engine runs in a process of its own, below condapipe (issue 27).

condapipe must not keep the engine's memory (GiBs while it packs a large package) for the steps
after the build, must never hold py-rattler's tokio runtime (a process that ran it cannot be forked
safely), and must survive the engine crashing. These build real (tiny) recipes whose build script
looks at the processes above it, or kills the engine's process as a crash or the OOM killer would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from condapipe.engines import BuildOptions
from condapipe.engines.rattler_build import built_packages
from condapipe.errors import BuildFailed

ENGINE_MODULE = "condapipe.engines.rattler_build_child"

# The build script's ancestors, one "PID<TAB>command line" per line, from its shell up to init.
# An ancestor's command line may itself hold tabs or newlines (a CI runner's `bash -c` script).
ANCESTRY_SH = """\
p=$$
while [ "$p" -gt 1 ]; do
  printf '%s\\t%s\\n' "$p" "$(tr '\\0\\t\\n' '   ' < /proc/$p/cmdline)"
  p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2)
done
"""


def _recipe(root: Path, name: str, script: str) -> Path:
    """A recipe whose build script runs `script` (a bash file beside the recipe)."""
    recipe = root / name
    recipe.mkdir()
    (root / f"{name}.sh").write_text(script)
    (recipe / "recipe.yaml").write_text(
        f"package:\n  name: {name}\n  version: '1.0'\n"
        "build:\n  number: 0\n  script:\n"
        f"    - bash {root / f'{name}.sh'}\n"
        "    - mkdir -p $PREFIX/share && echo hi > $PREFIX/share/done.txt\n"
    )
    return recipe


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_engine_runs_in_a_fresh_interpreter_below_condapipe_which_never_loads_it(
    tmp_path: Path,
) -> None:
    chain_file = tmp_path / "ancestry.txt"
    recipe = _recipe(tmp_path, "ancestry", f"( {ANCESTRY_SH} ) > {chain_file}\n")
    # The caller is a fresh process too, so that what it imported is its own doing.
    caller = (
        "import json, os, sys; from pathlib import Path;"
        "from condapipe.engines import BuildOptions, RattlerBuildEngine;"
        "from condapipe.package.channel_index import ensure_channel;"
        f"o = BuildOptions(output_dir=Path({str(tmp_path / 'channel')!r}),"
        f" work_dir=Path({str(tmp_path / 'work')!r}), run_tests=False);"
        "ensure_channel(o.output_dir);"
        f"r = RattlerBuildEngine().build(Path({str(recipe)!r}), o);"
        "print(json.dumps({'pid': os.getpid(), 'packages': [str(p) for p in r.packages],"
        " 'loaded': sorted(m for m in sys.modules if m.split('.')[0] in ('rattler_build', 'rattler'))}))"
    )
    proc = subprocess.run([sys.executable, "-c", caller], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []  # py-rattler-build never ran in the caller
    assert [Path(p).name for p in result["packages"]] == [
        p.name for p in (tmp_path / "channel").glob("*/ancestry-1.0-*.conda")
    ]

    chain = [line.split("\t", 1) for line in chain_file.read_text().splitlines()]
    pids = [int(pid) for pid, _ in chain]
    assert result["pid"] in pids  # the build ran below the caller...
    below_caller = chain[: pids.index(result["pid"])]
    engines = [int(pid) for pid, cmdline in below_caller if f"-m {ENGINE_MODULE}" in cmdline]
    assert len(engines) == 1  # ...inside one fresh interpreter running the engine (no fork of the caller)
    assert engines[0] != result["pid"]


def test_env_reaches_the_build_while_the_callers_environment_stays_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.engines.test_engine_rattler_build import ECHO_RECIPE, build, contents, opts, write_recipe

    monkeypatch.delenv("MAX_JOBS", raising=False)
    seen_while_building: set[str | None] = set()

    def echo(line: str, style: str | None) -> None:  # runs in the caller while the build streams
        seen_while_building.add(os.environ.get("MAX_JOBS"))

    recipe = write_recipe(tmp_path, "echo-env", ECHO_RECIPE)
    result = build(recipe, opts(tmp_path, env=(("MAX_JOBS", "7"),), pythons=("3.11",), echo=echo))
    assert contents(result.packages[0], tmp_path / "x", "share/echo-env.txt") == "jobs=7 python=3.11\n"
    assert seen_while_building == {None}


KILL_ENGINE_SH = f"""\
echo $$ > {{pid_file}}
engine=$( ( {ANCESTRY_SH} ) | grep -F -- '-m {ENGINE_MODULE}' | head -n1 | cut -f1)
kill -KILL "$engine"
sleep 120
"""


def test_an_engine_killed_by_a_signal_is_a_one_line_failure_naming_it_and_the_log(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pid_file = tmp_path / "script.pid"
    recipe = _recipe(tmp_path, "doomed", KILL_ENGINE_SH.format(pid_file=pid_file))
    argv = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
    argv += ["build", str(recipe), "--engine", "rattler-build", "--no-test"]
    proc = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=300)

    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: rattler-build crashed while building {recipe}: ")
    assert "its process was killed by SIGKILL (out of memory?)" in last
    assert "Traceback" not in proc.stderr
    log = Path(last.rsplit("log: ", 1)[1])
    assert log.parent == project / ".condapipe" / "logs"
    assert "condapipe: the rattler-build process was killed by SIGKILL" in log.read_text()
    # The build script the engine left behind was stopped with it, and nothing was published.
    script = int(pid_file.read_text())
    deadline = time.monotonic() + 15
    while _alive(script) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(script)
    assert not list(project.glob("channel/**/*.conda"))


def test_only_package_files_in_the_engines_output_folder_are_taken(tmp_path: Path) -> None:
    scratch = (tmp_path / "scratch").resolve()
    (scratch / "linux-64").mkdir(parents=True)
    good = scratch / "linux-64" / "a-1.0-0.conda"
    good.write_bytes(b"x")
    outside = tmp_path / "elsewhere.conda"
    outside.write_bytes(b"x")
    link = scratch / "linux-64" / "b-1.0-0.conda"
    link.symlink_to(outside)
    (scratch / "linux-64" / "notes.txt").write_text("x")
    log = tmp_path / "build.log"

    assert built_packages([str(good)], scratch, log) == [good]
    for bad in (
        str(outside),
        str(link),
        str(scratch / "linux-64" / "notes.txt"),
        str(scratch / "linux-64" / ".." / "linux-64" / "a-1.0-0.conda"),
        "linux-64/a-1.0-0.conda",
        str(scratch / "linux-64" / "missing-1.0-0.conda"),
        7,
    ):
        with pytest.raises(BuildFailed, match="not a package file in") as info:
            built_packages([bad], scratch, log)
        assert "\n" not in str(info.value) and str(log) in str(info.value)
    with pytest.raises(BuildFailed, match="no package list"):
        built_packages({"a": 1}, scratch, log)


def test_an_unreadable_variants_file_is_a_one_line_usage_error(tmp_path: Path) -> None:
    from condapipe.engines import RattlerBuildEngine
    from condapipe.errors import UsageError

    recipe = _recipe(tmp_path, "variants", "true\n")
    (recipe / "variants.yaml").write_text("python: [unclosed\n")
    options = BuildOptions(output_dir=tmp_path / "channel", work_dir=tmp_path / "work")
    with pytest.raises(UsageError, match=r"cannot parse \S*/variants\.yaml: ") as info:
        RattlerBuildEngine().build(recipe, options)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "work" / "logs").exists()  # nothing was built: no build log

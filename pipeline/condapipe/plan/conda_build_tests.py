"""Re-test a conda-build (v0) package as `conda build --test` does, on the package as published.

conda-build writes a package's tests into info/test/ (test/commands -> run_test.sh, test/imports
-> run_test.py, test/requires -> test_time_dependencies.json) and runs them in a fresh
environment with its build variables set: CONDA_PY, PY_VER, PKG_NAME, PKG_VERSION, PYTHON,
SP_DIR, ... A recipe's test relies on them (`assert os.getenv('CONDA_PY')`), so condapipe sets
the same ones, runs the same scripts the same way (`bash -x -e run_test.sh`, `python -s
run_test.py`) and keeps their output in the step's log, where a failing assertion can be read.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from condapipe.errors import BuildFailed

# Script -> how conda-build runs it (conda_build/build.py: test()); the interpreter is the env's.
RUNNERS: dict[str, tuple[str, ...]] = {
    "run_test.sh": ("bash", "-x", "-e"),
    "run_test.py": ("python", "-s"),
    "run_test.pl": ("perl",),
    "run_test.lua": ("lua",),
    "run_test.r": ("Rscript",),
}
# The interpreter conda-build adds to the test env for a script of that kind (conda_build/build.py).
INTERPRETERS = {"run_test.py": "python", "run_test.pl": "perl", "run_test.lua": "lua", "run_test.r": "r-base"}
DEPENDENCIES = "info/test/test_time_dependencies.json"
TAIL_LINES = 6  # lines of a failed script's output quoted in the error
PREFIX_LENGTH = 255  # conda-build's prefix_length: the test prefix is padded to it


@dataclass(frozen=True)
class TestRun:
    """Where one package's tests run: its fresh prefix and the folder holding its test files."""

    prefix: Path
    test_dir: Path


def test_prefix(scratch: Path) -> Path:
    """The test env's folder named as conda-build names it (config.test_prefix): `_test_env` padded
    with `_placehold` up to a 255-character path, so a test that checks its prefix sees one."""
    base = str(scratch / "_test_env")
    return Path(base + ("_placehold" * 26)[: max(PREFIX_LENGTH - len(base), 0)])


def _test_files(pkg: Path, into: Path) -> list[str]:
    """Write the package's info/test/ files into `into`; the script names present, in run order."""
    from condapipe.package.io import info_names, read_info_file

    for name in info_names(pkg, "info/test/"):
        rel = PurePosixPath(name).relative_to("info/test")
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise BuildFailed(f"{pkg.name}: test file {name!r} leaves info/test")
        target = into / Path(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read_info_file(pkg, name))
    return [script for script in RUNNERS if (into / script).is_file()]


def _install(
    pkg: Path, requires: list[str], channels: list[str], prefix: Path, cache: Path
) -> dict[str, str]:
    """Solve and install the package (exactly this build) and its test requirements into `prefix`;
    name -> version of what was installed."""
    import rattler

    from condapipe.package.io import read_index

    index = read_index(pkg)
    spec = f"{index['name']} =={index['version']} {index['build']}"
    platforms = [str(index.get("subdir") or rattler.Subdir.current()), "noarch"]

    async def run() -> dict[str, str]:
        records = await rattler.solve(
            [rattler.Channel(c) for c in channels],
            [spec, *requires],
            platforms=[rattler.Subdir(p) for p in dict.fromkeys([*platforms, str(rattler.Subdir.current())])],
            virtual_packages=rattler.VirtualPackage.detect(),
        )
        await rattler.install(records, prefix, cache_dir=cache, show_progress=False)
        return {r.name.normalized: str(r.version) for r in records}

    return asyncio.run(run())


def build_variables(index: dict[str, object], installed: dict[str, str], prefix: Path) -> dict[str, str]:
    """The variables conda-build sets for a test (conda_build/environ.py), for this package and env."""
    env = {
        "CONDA_BUILD": "1",
        "PREFIX": str(prefix),
        "CONDA_PREFIX": str(prefix),
        "PKG_NAME": str(index["name"]),
        "PKG_VERSION": str(index["version"]),
        "PKG_BUILDNUM": str(index.get("build_number", 0)),
        "PKG_BUILD_STRING": str(index["build"]),
        "SUBDIR": str(index.get("subdir", "")),
        "target_platform": str(index.get("subdir", "")),
    }
    python = installed.get("python")
    if python:
        major_minor = ".".join(python.split(".")[:2])
        env |= {
            "PYTHON": str(prefix / "bin" / "python"),
            "PY_VER": major_minor,
            "CONDA_PY": major_minor.replace(".", ""),
            "PY3K": "1" if major_minor.startswith("3") else "0",
            "STDLIB_DIR": str(prefix / "lib" / f"python{major_minor}"),
            "SP_DIR": str(prefix / "lib" / f"python{major_minor}" / "site-packages"),
        }
    numpy = installed.get("numpy")
    if numpy:
        env["NPY_VER"] = ".".join(numpy.split(".")[:2])
    return env


def _activation(prefix: Path) -> str:
    """Shell lines that activate `prefix` as `conda activate` would (its activate.d scripts)."""
    lines = [f'export PATH="{prefix}/bin:$PATH"']
    lines += [f'. "{script}"' for script in sorted((prefix / "etc" / "conda" / "activate.d").glob("*.sh"))]
    return "\n".join(lines) + "\n"


def run_scripts(
    pkg: Path, scripts: list[str], where: TestRun, env: dict[str, str], write: Callable[[str], None]
) -> None:
    """Run each script in the activated env from the test folder; raise BuildFailed naming the
    script and quoting the end of its output at the first that fails."""
    for script in scripts:
        runner = list(RUNNERS[script])
        tool = where.prefix / "bin" / runner[0]
        if runner[0] != "bash":
            if not tool.is_file():
                raise BuildFailed(f"{pkg.name}: {script} needs {runner[0]}, which its test env lacks")
            runner[0] = str(tool)
        wrapper = where.test_dir / f".condapipe-{script}.sh"
        command = " ".join(f'"{a}"' for a in [*runner, script])
        wrapper.write_text(_activation(where.prefix) + f"exec {command}\n")
        write(f"{pkg.name}: running {script}")
        proc = subprocess.run(
            ["bash", str(wrapper)],
            cwd=where.test_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            check=False,
        )
        write(proc.stdout.rstrip("\n"))
        if proc.returncode != 0:
            tail = [line for line in proc.stdout.splitlines() if line.strip()][-TAIL_LINES:]
            raise BuildFailed(
                f"conda-build test {script} of {pkg.name} failed (exit {proc.returncode}): "
                + (" | ".join(line.strip() for line in tail) or "no output")
            )


def run_conda_build_tests(
    pkg: Path, channels: list[str], scratch: Path, cache: Path, write: Callable[[str], None]
) -> str:
    """Run the info/test/ scripts of the conda-build package `pkg` in a fresh env under `scratch`;
    the result for the report ("2 passed", "no tests"). Raises BuildFailed when one fails."""
    from condapipe.package.io import read_index, read_info_file

    where = TestRun(prefix=test_prefix(scratch), test_dir=scratch / "test")
    shutil.rmtree(scratch, ignore_errors=True)
    where.test_dir.mkdir(parents=True)
    scripts = _test_files(pkg, where.test_dir)
    if not scripts:
        write(f"{pkg.name}: the package carries no tests")
        return "no tests"
    requires: list[str] = []
    if (where.test_dir / "test_time_dependencies.json").is_file():
        requires = [str(r) for r in json.loads(read_info_file(pkg, DEPENDENCIES))]
    named = {r.split()[0] for r in requires if r.strip()}
    requires += [INTERPRETERS[s] for s in scripts if s in INTERPRETERS and INTERPRETERS[s] not in named]
    asked = ", ".join(requires) or "nothing"
    write(f"{pkg.name}: conda-build tests {', '.join(scripts)}; test requires {asked}")
    try:
        installed = _install(pkg, requires, channels, where.prefix, cache)
    except Exception as exc:  # py-rattler's solver/installer errors: one line, with what was asked
        why = " ".join(str(exc).split())[:400]
        raise BuildFailed(
            f"conda-build tests of {pkg.name} could not set up their environment "
            f"(test requires {', '.join(requires) or 'nothing'}; channels {', '.join(channels)}): {why}"
        ) from None
    # the process boundary: the test commands inherit this environment with conda-build's variables
    env = {**os.environ, **build_variables(read_index(pkg), installed, where.prefix)}
    env["SRC_DIR"] = str(where.test_dir)  # where conda-build puts test/source_files for the test
    run_scripts(pkg, scripts, where, env, write)
    return f"{len(scripts)} passed"

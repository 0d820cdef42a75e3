"""A newcomer follows README.md literally: a clean checkout, a fresh venv, the README's commands.

The commands are parsed out of README.md's first code blocks (so this test breaks when the README
changes): the setup line (its install runs as written; the main job with --dry-run), the test
command (its install runs as written; then the tests that need the PyPI test tools run with the
venv's Python), and the three headline commands of "What it does", each with --dry-run, in a
fresh project directory. Then real (not dry) builds as a newcomer's first own recipe goes: one
whose dependencies resolve against local channels (a -c folder and the --build-tools wheels tool
channel) and is built, tested and published, and one that needs a package no channel has, which
stops before anything compiles with the message asserted here. The venv is the one the README's
commands make (`python3 -m venv .venv`, no system site-packages: Debian's system pip refuses to
install outside a venv, PEP 668) and installs from the package index pip is configured with, as a
newcomer's would.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from channel_helpers import Pkg, closed_port_url, make_channel

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def readme_blocks() -> list[list[str]]:
    """The README's indented code blocks, in order, each a list of its (dedented) lines."""
    blocks: list[list[str]] = []
    current: list[str] = []
    previous_blank = True
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("    ") and (current or previous_blank):
            current.append(line[4:])
        elif current and not line.strip():
            current.append("")
        else:
            if current:
                blocks.append([x for x in current if x.strip()])
            current = []
        previous_blank = not line.strip()
    if current:
        blocks.append([x for x in current if x.strip()])
    return blocks


def commands() -> dict[str, list[str]]:
    setup, tests, headline = readme_blocks()[:3]
    return {"setup": setup, "tests": tests, "headline": headline}


def clean_checkout(dest: Path) -> Path:
    """What a clone of this tree would hold: the tracked and not-ignored files, nothing built."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout of condapipe and git")
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in filter(None, listed):  # uncommitted edits count: the test checks this tree, not HEAD
        rel = raw.decode()
        src, dst = REPO / rel, dest / rel
        if src.is_file() and not src.is_symlink():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    deleted = subprocess.run(["git", "ls-files", "-z", "-d"], cwd=REPO, capture_output=True, check=True)
    for raw in filter(None, deleted.stdout.split(b"\0")):
        (dest / raw.decode()).unlink(missing_ok=True)
    return dest


def shell(line: str, cwd: Path, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def dry(line: str) -> str:
    """A README command line as a dry run: `--dry-run` appended to each condapipe command in it."""
    return " && ".join(
        part.strip() + (" --dry-run" if part.strip().startswith("condapipe ") else "")
        for part in line.split("&&")
    )


def test_readme_commands_work_for_a_newcomer(tmp_path: Path) -> None:
    readme = commands()
    # PEP 668: Debian's system pip refuses to install outside a venv, so each command makes and
    # enters one first (a fresh Debian/Ubuntu needs only python3-venv for that, as the README says).
    in_venv = "python3 -m venv .venv && . .venv/bin/activate && "
    assert readme["setup"] == [
        f"{in_venv}pip install -e . && condapipe build cuda-smoke --cuda 13.0 --arch 9.0"
    ], "the README's first command changed: update this test's expectations with it"
    assert readme["tests"] == [f"{in_venv}pip install -e '.[test]' && python -m pytest"]
    assert "sudo apt-get install python3-venv" in (REPO / "README.md").read_text()
    assert [shlex.split(c)[:3] for c in readme["headline"]] == [
        ["condapipe", "build", "pytorch"],
        ["condapipe", "build", "magma"],
        ["condapipe", "upload", "--channel"],
    ]
    assert readme["tests"][0] in (REPO / ".ci" / "run").read_text(), (
        ".ci/run must run the README's test command"
    )

    checkout = clean_checkout(tmp_path / "condapipe")
    venv = checkout / ".venv"  # the README's commands make it
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    outside = [p for p in env.get("PATH", "").split(os.pathsep) if p != str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join(outside)  # this test's own venv is not the newcomer's
    has_nvcc = shutil.which("nvcc") is not None

    # 1. The setup line: the install as written, the main job as a dry run.
    setup = shell(dry(readme["setup"][0]), checkout, env)
    assert (venv / "bin" / "condapipe").exists(), setup.stderr[-3000:]
    main_job_code = 0 if has_nvcc and "doctor: block" not in setup.stderr else 3
    assert setup.returncode == main_job_code, setup.stderr[-3000:]
    assert "cuda-smoke-1.0.0-cuda13.0: render, build, fix, verify, test, publish" in setup.stdout
    # what follows runs as in the newcomer's shell after that line: with the venv active
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}")

    # 2. The test command: its install as written, then the tests that need the PyPI test tools.
    install = readme["tests"][0].rsplit("&&", 1)[0].strip()
    tools = shell(install, checkout, env)
    assert tools.returncode == 0, tools.stderr[-3000:]
    for tool in ("shellcheck", "cmake", "ninja", "pytest"):
        assert (venv / "bin" / tool).exists(), f"the test extras must bring {tool}"
    quality = shell(
        "python -m pytest -q -p no:cacheprovider tests/render/test_render_quality.py", checkout, env
    )
    assert quality.returncode == 0, quality.stdout[-3000:]

    # 3. The three headline commands, as dry runs in a fresh project directory.
    project = tmp_path / "project"
    project.mkdir()
    pytorch_cmd, magma_cmd, upload_cmd = readme["headline"]

    pytorch = shell(dry(pytorch_cmd), project, env)
    assert (
        "chose pytorch 1.8.0: upstream built pytorch for CUDA 11.0 only in 1.7.0 and 1.7.1" in pytorch.stderr
    )
    assert "chose python 3.9: " in pytorch.stderr
    # Resolve first: the dry run shows where the source comes from and what the channels give.
    assert "source git https://github.com/pytorch/pytorch.git at v1.8.0" in pytorch.stdout
    assert "https://conda.anaconda.org/conda-forge (remote, " in pytorch.stdout
    unresolved = "dependencies do not resolve" in pytorch.stderr
    undownloadable = "cannot be downloaded" in pytorch.stderr  # no route to github.com from here
    blocked = "doctor: block:" in pytorch.stderr or unresolved or undownloadable
    assert pytorch.returncode == (3 if blocked else 0), pytorch.stderr
    if blocked:
        assert re.search(r"^  stop ", pytorch.stdout, re.M) and not re.search(
            r"^  run ", pytorch.stdout, re.M
        )

    magma = shell(dry(magma_cmd), project, env)
    if has_nvcc:
        assert re.match(r"chose cuda \d+\.\d+: the CUDA of the nvcc on PATH", magma.stderr), magma.stderr
        stops = any(
            why in magma.stderr
            for why in ("doctor: block:", "dependencies do not resolve", "cannot be downloaded")
        )
        assert magma.returncode == (3 if stops else 0), magma.stderr
    else:
        assert magma.returncode == 2 and "run: condapipe build magma --cuda" in magma.stderr

    upload = shell(dry(upload_cmd), project, {**env, "ANACONDA_API_TOKEN": "", "BINSTAR_API_TOKEN": ""})
    assert upload.returncode == 2, upload.stderr
    assert f"nothing to upload: no .conda or .tar.bz2 package under {project / 'channel'}" in upload.stderr
    assert not (project / "channel").exists() and not (project / ".condapipe").exists()

    # 4. A real build of one's own recipe: resolved against local channels, then built for real.
    first_own_recipe(tmp_path / "own", env)


RECIPE = """\
package:
  name: {name}
  version: 0.1.0
build:
  number: 0
  script:
    - cmake --version > version.txt
    - mkdir -p $PREFIX/share/{name} && cp version.txt $PREFIX/share/{name}/
requirements:
  build:
    - cmake
  host:
    - python
{extra}  run:
    - python
tests:
  - script:
      - test -s $PREFIX/share/{name}/version.txt
"""


def first_own_recipe(project: Path, env: dict[str, str]) -> None:
    """`condapipe build ./recipe` for real: dependencies from a local -c channel and the tool
    channel resolve, build and publish; a dependency no channel has stops it before compiling."""
    project.mkdir()
    make_channel(project / "deps", [Pkg("python", "3.11.9"), Pkg("python", "3.12.4")])
    for name, extra in (("hello-newcomer", ""), ("needs-libfoo", "    - libfoo-newcomer >=1.0\n")):
        (project / name).mkdir()
        (project / name / "recipe.yaml").write_text(RECIPE.format(name=name, extra=extra))
        (project / name / "variants.yaml").write_text('python:\n  - "3.11"\n')
    built = shell(
        "condapipe build ./hello-newcomer -c ./deps --build-tools wheels --engine rattler-build",
        project,
        env,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert "resolved 3 environments before building" in built.stderr
    assert list((project / "channel" / "linux-64").glob("hello-newcomer-0.1.0-*.conda"))

    # Without network (HTTPS through a port nothing listens on): the default conda-forge cannot
    # answer, and the missing packages are named with the channels, their state and the fixes.
    offline = {**env, "HTTPS_PROXY": closed_port_url(), "https_proxy": closed_port_url()}
    missing = shell("condapipe build ./needs-libfoo --engine rattler-build", project, offline, timeout=300)
    assert missing.returncode == 3, missing.stderr[-3000:]
    assert "channel did not answer: https://conda.anaconda.org/conda-forge" in missing.stderr
    last = missing.stderr.strip().splitlines()[-1]
    assert last.startswith("error: dependencies do not resolve, nothing was built: ")
    assert "libfoo-newcomer >=1.0 (needs-libfoo (host))" in last
    assert "https://conda.anaconda.org/conda-forge (remote, unreachable" in last
    assert f"file://{project / 'channel'} (local, reachable)" in last
    assert "--offline" in last and "network" in last
    assert not list((project / ".condapipe").glob("steps/build_needs-libfoo*"))  # nothing compiled

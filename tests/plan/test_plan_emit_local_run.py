"""The workflow `condapipe plan --emit github-actions` writes, run job by job on this machine for the
cuda-smoke family (real nvcc 13.0, rattler-build), ends with the channel one `condapipe build` makes.

What is simulated, and how (everything else runs as the runner would run it):
- each job runs in its own empty directory (a fresh runner), jobs in `needs:` order;
- `actions/checkout` and `actions/setup-python` do nothing, and the condapipe-wheel job and the
  "Install condapipe" steps are skipped: condapipe is already installed here, and `condapipe` on
  PATH runs this Python's (tests/plan/test_plan_emit_install.py builds and installs that wheel);
- `actions/upload-artifact` copies the job's `path` to an artifact store (hidden files left out, as
  upload-artifact v4+ does); `actions/download-artifact` copies one artifact (`name`) or all that
  match `pattern` merged (`merge-multiple`) into the job's `path`;
- `${{ secrets.* }}` / `${{ vars.* }}` come from dicts here, and the publish job's
  `condapipe upload --channel "$ANACONDA_CHANNEL"` is run as `condapipe upload --to DIR` (the one
  substitution in a `run:` step): anaconda.org is not reachable, and a local channel is the thing
  compared.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from condapipe.package.io import unpack
from condapipe.plan.emit import WHEEL_JOB
from condapipe.verify.verifier import verify_package

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA 13.0) on PATH"),
]

SPEC = ["cuda-smoke", "--cuda", "13.0", "--arch", "8.0;9.0"]
SECRETS = {"ANACONDA_API_TOKEN": "not-used-with-upload-to"}
VARS = {"ANACONDA_CHANNEL": "my-org"}
UPLOAD = 'condapipe upload --channel "$ANACONDA_CHANNEL"'
NOT_REPRODUCIBLE = {
    "bin/cuda-smoke",
    "lib/libcuda_smoke.so",
    "info/index.json",
    "info/paths.json",
    "info/about.json",
    "info/recipe/rendered_recipe.yaml",
}


def _path_with_condapipe(tmp: Path) -> str:
    bindir = tmp / "bin"
    bindir.mkdir()
    shim = bindir / "condapipe"
    shim.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "from condapipe.cli.main import main; main()" "$@"\n'
    )
    shim.chmod(0o755)
    return f"{bindir}{os.pathsep}{os.environ['PATH']}"


def _expr(value: str) -> str:
    def sub(m: re.Match[str]) -> str:
        kind, name = m.group(1), m.group(2)
        return {"secrets": SECRETS, "vars": VARS}[kind][name]

    return re.sub(r"\$\{\{\s*(secrets|vars)\.(\w+)\s*\}\}", sub, value)


def _copy(src: Path, dest: Path, *, hidden: bool = True) -> None:
    ignore = None if hidden else shutil.ignore_patterns(".*")
    shutil.copytree(src, dest, dirs_exist_ok=True, ignore=ignore)


def run_workflow(workflow: dict, root: Path, publish_dir: Path, path: str) -> list[str]:
    """Run every job as described in the module docstring; returns the job keys in the order run."""
    artifacts = root / "artifacts"
    done: list[str] = []
    for key, job in workflow["jobs"].items():
        assert all(n in done for n in job.get("needs", [])), f"{key} runs before what it needs"
        if (
            key == WHEEL_JOB
        ):  # condapipe is installed here already (its wheel: tests/plan/test_plan_emit_install.py)
            done.append(key)
            continue
        ws = root / "jobs" / key
        ws.mkdir(parents=True)
        for step in job["steps"]:
            uses = step.get("uses", "")
            args = step.get("with", {})
            if uses.startswith(("actions/checkout@", "actions/setup-python@")):
                continue
            if step.get("name") in ("Install condapipe", "Fetch the condapipe wheel"):
                continue
            if uses.startswith("actions/upload-artifact@"):
                _copy(ws / args["path"], artifacts / args["name"], hidden=False)
            elif uses.startswith("actions/download-artifact@"):
                names = [args["name"]] if "name" in args else sorted(os.listdir(artifacts))
                for name in names:
                    if fnmatch.fnmatch(name, args.get("pattern", name)):
                        dest = ws / args["path"] if "name" in args or args.get("merge-multiple") else None
                        _copy(artifacts / name, dest or ws / args["path"] / name)
            else:
                script = step["run"].replace(UPLOAD, f'condapipe upload --to "{publish_dir}"')
                env = {**os.environ, "PATH": path, **{k: _expr(v) for k, v in step.get("env", {}).items()}}
                proc = subprocess.run(
                    ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                    cwd=ws,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                assert proc.returncode == 0, f"{key}: {step.get('name')}: {proc.stderr[-3000:]}"
                assert SECRETS["ANACONDA_API_TOKEN"] not in proc.stdout + proc.stderr
        done.append(key)
    return done


def _packages(channel: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(channel)): p
        for p in sorted(channel.glob("*/*"))
        if p.name.endswith((".conda", ".tar.bz2"))
    }


def _member_digests(package: Path, dest: Path) -> dict[str, str]:
    tree = unpack(package, dest)
    return {
        str(f.relative_to(tree)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(tree.rglob("*"))
        if f.is_file() and not f.is_symlink()
    }


def test_the_emitted_jobs_run_here_end_with_the_channel_of_a_single_machine_build(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_with_condapipe(tmp_path)}
    plan_dir = tmp_path / "planner"
    plan_dir.mkdir()
    subprocess.run(
        ["condapipe", "plan", *SPEC, "--emit", "github-actions", "-o", "wf.yml"],
        cwd=plan_dir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    workflow = YAML(typ="safe").load((plan_dir / "wf.yml").read_text())
    ci = tmp_path / "ci"
    publish_dir = tmp_path / "published"
    order = run_workflow(workflow, ci, publish_dir, env["PATH"])
    assert order == ["condapipe-wheel", "cuda-smoke-1_0_0-cuda13_0", "publish"]

    single = tmp_path / "single"
    single.mkdir()
    subprocess.run(["condapipe", "build", *SPEC], cwd=single, env=env, check=True, capture_output=True)

    ours, theirs = _packages(publish_dir), _packages(single / "channel")
    assert list(ours) == list(theirs) and len(ours) == 1  # same file names (the hash in the build string too)
    for channel in (publish_dir, single / "channel"):
        repodata = json.loads((channel / "linux-64" / "repodata.json").read_text())
        assert sorted(repodata["packages.conda"]) == [Path(n).name for n in ours]
    # Not byte-identical here, so not compared by sha256: nvcc names its temporaries after the process
    # id (tmpxft_<pid>_…, kept in the .so's strings, which also changes the ELF build-id), rattler-build
    # stamps info/index.json and the rendered recipe with the build time, and info/about.json and the
    # rendered recipe record the build folders and channel paths. Every other file inside is
    # compared by sha256; the binaries by the CUDA code they carry (condapipe verify's fatbin report).
    for name in ours:
        a = _member_digests(ours[name], tmp_path / "a" / name)
        b = _member_digests(theirs[name], tmp_path / "b" / name)
        assert set(a) == set(b)
        differing = {k for k in a if a[k] != b[k]}
        assert differing <= NOT_REPRODUCIBLE, differing - NOT_REPRODUCIBLE
        index_a, index_b = (
            json.loads((d / name / "info" / "index.json").read_text())
            for d in (tmp_path / "a", tmp_path / "b")
        )
        assert {**index_a, "timestamp": 0} == {**index_b, "timestamp": 0}
        fatbins = [verify_package(pkg).to_dict()["fatbins"] for pkg in (ours[name], theirs[name])]
        assert fatbins[0] == fatbins[1] and fatbins[0]

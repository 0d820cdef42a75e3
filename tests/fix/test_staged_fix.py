"""A family's build.sh runs condapipe's fix on the staged prefix, before the engine packs.

Why a user cares: a fix that rewrites files after the engine packed compresses the whole payload a
second time (minutes for a PyTorch at level 19). Fixed before packing, the engine compresses the
fixed files once. Only the files the build added are touched (never a host package's file, which
may be a hard link into the package cache), the engine's own relocation is off only while this
runs (a user's plain `conda build` / `rattler-build` of the recipe relocates as usual), and the
launcher works inside a build script's environment (other Python, PYTHON* variables, no condapipe
on PATH).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from elfkit import LIB_SRC, gcc_shared, readelf_dynamic
from render_helpers import load_yaml, v0_meta, v1_render, variant_combos

from condapipe.buildspec.build_spec import BuildSpec, build_spec
from condapipe.fix.staged import fix_staged_prefix, new_elf_files, write_launcher
from condapipe.render.recipe_dir import build_model, build_sh, render_model

EXT = "lib/python3.12/site-packages/pkg/_ext.so"


def rpath_of(path: Path) -> str:
    (line,) = [entry for entry in readelf_dynamic(path) if "RPATH" in entry or "RUNPATH" in entry]
    return line.split("[", 1)[1].rstrip("]")


@pytest.fixture
def staged(tmp_path: Path) -> Path:
    """A host prefix as both engines leave it after build.sh: a host package's library (listed in
    conda-meta) and two libraries the build installed, with the build machine's absolute rpaths."""
    prefix = tmp_path / "host_env_placehold"
    gcc_shared(prefix / "lib" / "libhost.so", LIB_SRC, rpath=f"{prefix}/lib")
    gcc_shared(prefix / "lib" / "libnew.so", LIB_SRC, rpath=f"{prefix}/lib")
    gcc_shared(prefix / EXT, LIB_SRC, rpath=f"{prefix}/lib")
    (prefix / "conda-meta").mkdir()
    record = {"name": "host-lib", "files": ["lib/libhost.so"]}
    (prefix / "conda-meta" / "host-lib-1.0-0.json").write_text(json.dumps(record))
    return prefix


def test_only_the_files_the_build_added_are_fixed(staged: Path) -> None:
    assert new_elf_files(staged) == ["lib/libnew.so", EXT]
    host_before = (staged / "lib" / "libhost.so").read_bytes()

    report = fix_staged_prefix(staged, "pytorch", build_prefixes=())

    assert report.ok and len(report.changed) == 2
    assert (staged / "lib" / "libhost.so").read_bytes() == host_before  # a host package's file
    assert rpath_of(staged / "lib" / "libnew.so") == "$ORIGIN"
    assert rpath_of(staged / EXT).startswith("$ORIGIN/")


def test_a_new_file_hard_linked_to_a_host_packages_file_is_fixed_as_its_own_copy(staged: Path) -> None:
    # a build that `cp -l`s a host library into its own folder: the host file (and the package
    # cache it is linked from) must keep its bytes
    host = staged / "lib" / "libhost.so"
    cache_copy = staged.parent / "pkgs-cache-libhost.so"
    os.link(host, cache_copy)
    linked = staged / "lib" / "torch" / "libhost.so"
    linked.parent.mkdir()
    os.link(host, linked)
    before = host.read_bytes()

    report = fix_staged_prefix(staged, "pytorch", build_prefixes=())

    assert "lib/torch/libhost.so" in [f.path for f in report.changed]
    assert host.read_bytes() == before and cache_copy.read_bytes() == before
    assert linked.stat().st_ino != host.stat().st_ino
    assert rpath_of(linked).startswith("$ORIGIN")


def test_a_second_run_changes_nothing(staged: Path) -> None:
    fix_staged_prefix(staged, "pytorch", build_prefixes=())
    again = fix_staged_prefix(staged, "pytorch", build_prefixes=())
    assert again.changed == [] and len(again.files) == 2


def test_an_unreadable_package_record_is_a_one_line_error(staged: Path) -> None:
    (staged / "conda-meta" / "broken-1.0-0.json").write_text("{not json")
    launcher = write_launcher(staged.parent / "bin")
    assert launcher is not None
    done = subprocess.run(
        [launcher, "--family", "pytorch", "--prefix", staged], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("condapipe: staged fix: error:") and "broken-1.0-0.json" in line


def test_the_launcher_runs_in_a_build_scripts_environment(staged: Path, tmp_path: Path) -> None:
    launcher = write_launcher(tmp_path / "bin")
    assert launcher is not None
    # what a build script has: another Python's variables, no condapipe on PATH, a bare PATH
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "nowhere"), "PYTHONHOME": str(tmp_path)}
    done = subprocess.run(
        [launcher, "--family", "pytorch", "--prefix", staged, "--build-prefix", ""],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 of 2 new ELF files rewritten before packing" in done.stdout
    assert rpath_of(staged / "lib" / "libnew.so") == "$ORIGIN"


def test_the_launcher_is_rewritten_only_when_it_changes(tmp_path: Path) -> None:
    first = write_launcher(tmp_path)
    assert first is not None
    stamp = first.stat().st_mtime_ns
    os.utime(first, ns=(stamp - 10**9, stamp - 10**9))
    assert write_launcher(tmp_path) == first
    assert first.stat().st_mtime_ns == stamp - 10**9
    assert os.access(first, os.X_OK)


def _spec() -> BuildSpec:
    return build_spec("pytorch", {"version": "2.6.0", "cuda": ["cpu"], "python": ["3.12"]})


def test_a_family_recipe_ends_with_the_staged_fix_and_a_recipe_of_no_family_does_not() -> None:
    from dataclasses import replace

    model = build_model(_spec())
    script = build_sh(model)
    assert script.rstrip().endswith("fi")
    assert '"$CONDAPIPE_STAGED_FIX" --family "pytorch" --prefix "$PREFIX"' in script
    assert "CONDAPIPE_STAGED_FIX" not in build_sh(replace(model, staged_fix_family=None))


def test_the_engines_relocation_is_off_only_while_condapipe_drives_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = render_model(build_model(_spec()), tmp_path / "recipe").out_dir
    variant = variant_combos(load_yaml((recipe / "conda_build_config.yaml").read_text()))[0]
    assert "binary_relocation" not in v0_meta(recipe, "linux-64", variant, environ={})["build"]  # default: on
    driven = v0_meta(recipe, "linux-64", variant, environ={"CONDAPIPE_STAGED_FIX": "/x/launcher"})
    assert driven["build"]["binary_relocation"] is False
    assert "CONDAPIPE_STAGED_FIX" in driven["build"]["script_env"]

    # rattler-build renders it from its process environment (rattler-build's default is on)
    monkeypatch.delenv("CONDAPIPE_STAGED_FIX", raising=False)
    (plain,) = v1_render(recipe, "linux-64")
    assert plain.recipe.build.to_dict()["dynamic_linking"].get("binary_relocation", True) is True
    monkeypatch.setenv("CONDAPIPE_STAGED_FIX", "/x/launcher")
    (driven_v1,) = v1_render(recipe, "linux-64")
    assert driven_v1.recipe.build.to_dict()["dynamic_linking"]["binary_relocation"] is False

"""Opt-in (`pytest -m upstream`): every catalog patch applies to the real upstream files.

For each patch entry and each version that matters (the releases it names in checked_on plus the
first and last upstream release inside its range), the test fetches the upstream files into a
cache and runs `patches check` on them:

- pytorch: the wheels on PyPI carry the exact .py, .cmake and header files of each release
  (`pip download torch==X --no-deps`, the smallest macOS wheel); they are laid out as in the
  source tree using WHEEL_LAYOUT below.
  Targets no wheel carries (.cu sources, cudnn_frontend's headers) come from a real source tree:
  CONDAPIPE_PYTORCH_TREE_<X_Y_Z> (e.g. _2_6_0, the same variable the real-tree test reads); without
  it such an entry is skipped with that reason.
- magma: the release tarball from icl.utk.edu, or, when CONDAPIPE_MAGMA_SOURCES names a folder
  with magma-X.Y.Z/ trees (e.g. a git tag export after `python tools/codegen.py` for the
  precision-generated files), those trees.

Cache: $CONDAPIPE_UPSTREAM_CACHE (default ~/.cache/condapipe-upstream).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from functools import cache
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from condapipe.render.patch_catalog import PatchEntry, applicable, load_catalog
from condapipe.render.patch_check import APPLIES, check_entries

pytestmark = pytest.mark.upstream

CACHE = Path(os.environ.get("CONDAPIPE_UPSTREAM_CACHE", Path.home() / ".cache" / "condapipe-upstream"))
CATALOG = load_catalog()

# Where a source-tree path lives inside a torch wheel (first match wins; 1.0 kept headers in lib/).
WHEEL_LAYOUT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cmake/Modules_CUDA_fix/", ("torch/share/cmake/Caffe2/Modules_CUDA_fix/",)),
    ("aten/src/ATen/", ("torch/include/ATen/", "torch/lib/include/ATen/")),
    ("torch/", ("torch/",)),
)
# Small wheels that carry those files, tried in order.
WHEEL_TARGETS: tuple[tuple[str, str], ...] = (
    ("macosx_11_0_arm64", "3.11"),
    ("macosx_10_9_x86_64", "3.10"),
    ("macosx_10_9_x86_64", "3.8"),
    ("macosx_10_9_x86_64", "3.7"),
)
# magma releases (git tags of icl-utk-edu/magma), for the range boundaries.
MAGMA_RELEASES = ("2.5.0", "2.5.1", "2.5.2", "2.5.3", "2.5.4", "2.6.0", "2.6.1", "2.6.2",
                  "2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.10.0")  # fmt: skip
MAGMA_URL = "https://icl.utk.edu/projectsfiles/magma/downloads/magma-{version}.tar.gz"
CUDA_CANDIDATES = ("9.2", "10.2", "11.0", "11.8", "12.1", "12.6", "12.8", "13.0")


@cache
def pytorch_releases() -> tuple[str, ...]:
    with urllib.request.urlopen("https://pypi.org/pypi/torch/json", timeout=60) as resp:
        data = json.load(resp)
    return tuple(v for v, files in data["releases"].items() if files and not Version(v).is_prerelease)


def boundaries(entry: PatchEntry, releases: tuple[str, ...]) -> set[str]:
    """The first and last release inside the entry's range."""
    inside = sorted(Version(v) for v in releases if SpecifierSet(entry.versions).contains(v))
    return {str(inside[0]), str(inside[-1])} if inside else set()


def versions_to_check(entry: PatchEntry) -> list[str]:
    releases = pytorch_releases() if entry.package == "pytorch" else MAGMA_RELEASES
    return sorted(set(entry.checked_on) | boundaries(entry, releases), key=Version)


def build_for(entry: PatchEntry, version: str) -> list[PatchEntry]:
    """The patch entries that one build selecting `entry` applies, in order."""
    cuda = next((c for c in CUDA_CANDIDATES if not entry.cuda or SpecifierSet(entry.cuda).contains(c)), None)
    selected = applicable(entry.package, version, cuda, entry.platforms[0])
    assert entry in selected
    return [e for e in selected if e.patch_file is not None]


# --- pytorch: wheels from PyPI -------------------------------------------------------------


def torch_wheel(version: str) -> Path:
    folder = CACHE / "wheels" / version
    found = list(folder.glob("torch-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    for platform, python in WHEEL_TARGETS:
        argv = [sys.executable, "-m", "pip", "download", f"torch=={version}", "--no-deps",
                "--only-binary=:all:", "--platform", platform, "--python-version", python,
                "-d", str(folder), "-q"]  # fmt: skip
        if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
            return next(folder.glob("torch-*.whl"))
    pytest.fail(f"no small torch {version} wheel on PyPI for {WHEEL_TARGETS}")


def torch_tree(version: str, targets: set[str]) -> Path:
    tree = CACHE / "trees" / f"pytorch-{version}"
    with zipfile.ZipFile(torch_wheel(version)) as wheel:
        names = set(wheel.namelist())
        for target in sorted(targets):
            dst = tree / target
            if dst.is_file():
                continue
            for src_prefix, wheel_prefixes in WHEEL_LAYOUT:
                if not target.startswith(src_prefix):
                    continue
                member = next(
                    (
                        p + target[len(src_prefix) :]
                        for p in wheel_prefixes
                        if p + target[len(src_prefix) :] in names
                    ),
                    None,
                )
                if member:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    dst.write_bytes(wheel.read(member))
                break
    return tree


def real_pytorch_tree(version: str) -> Path | None:
    """A real source tree of `version` named by CONDAPIPE_PYTORCH_TREE_<X_Y_Z>, if any."""
    value = os.environ.get(f"CONDAPIPE_PYTORCH_TREE_{version.replace('.', '_')}")
    if not value:
        return None
    tree = Path(value)
    stamp = tree / "version.txt"  # 2.6.0's says 2.6.0a0
    if not stamp.is_file() or stamp.read_text().split("a")[0].strip() != version:
        pytest.fail(f"CONDAPIPE_PYTORCH_TREE_{version.replace('.', '_')}={value} is not a {version} tree")
    return tree


# --- magma: release tarballs ---------------------------------------------------------------


def magma_tree(version: str, targets: set[str]) -> Path:
    local = os.environ.get("CONDAPIPE_MAGMA_SOURCES")
    if local:
        tree = Path(local) / f"magma-{version}"
        if not tree.is_dir():
            pytest.fail(f"CONDAPIPE_MAGMA_SOURCES has no magma-{version}/")
        return tree
    tarball = CACHE / "magma" / f"magma-{version}.tar.gz"
    if not tarball.is_file():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".part")
        with (
            urllib.request.urlopen(MAGMA_URL.format(version=version), timeout=300) as resp,
            partial.open("wb") as fh,
        ):
            shutil.copyfileobj(resp, fh)
        partial.rename(tarball)
    tree = CACHE / "trees" / f"magma-{version}"
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            rel = member.name.split("/", 1)[-1]
            if rel in targets and not (tree / rel).is_file():
                data = tar.extractfile(member)
                assert data is not None
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_bytes(data.read())
    return tree


# --- the checks ----------------------------------------------------------------------------


@pytest.mark.parametrize("entry", [e for e in CATALOG.entries if e.kind == "patch"], ids=lambda e: e.id)
def test_every_range_boundary_is_among_the_checked_versions(entry):
    missing = versions_to_check(entry)
    assert set(missing) <= set(entry.checked_on), (
        f"check and add to checked_on: {sorted(set(missing) - set(entry.checked_on))}"
    )


@pytest.mark.parametrize("entry", [e for e in CATALOG.entries if e.kind == "patch"], ids=lambda e: e.id)
def test_patch_applies_to_upstream_files_on_every_version_that_matters(entry):
    for version in versions_to_check(entry):
        selected = build_for(entry, version)
        targets = {t for e in selected for t in e.target_files}
        if entry.package == "pytorch":
            tree = real_pytorch_tree(version) or torch_tree(version, targets)
            absent = sorted(t for t in targets if not (tree / t).is_file())
            if absent:
                pytest.skip(
                    f"torch {version}'s wheel lacks {absent[0]} (and {len(absent) - 1} more): set "
                    f"CONDAPIPE_PYTORCH_TREE_{version.replace('.', '_')} to a {version} source tree"
                )
        else:
            tree = magma_tree(version, targets)
        results = {r.entry_id: r for r in check_entries(selected, tree)}
        result = results[entry.id]
        assert result.status == APPLIES, (
            f"{entry.id} on {entry.package} {version}: {result.status}: {result.detail}"
        )


SCA = "cmake/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake"
PROBE = """set(CUDA_VERSION 12.8)
include(${SCA})
CUDA_SELECT_NVCC_ARCH_FLAGS(flags "8.0;9.0a;12.0+PTX")
message(STATUS "flags=${flags}")
"""


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
@pytest.mark.parametrize("entry", [e for e in CATALOG.entries if SCA in e.target_files], ids=lambda e: e.id)
def test_patched_select_compute_arch_accepts_rtx_5090_arch_list(entry, tmp_path):
    """Behaviour, not just text: unpatched CMake rejects 12.0, patched emits sm_120 and compute_120."""
    probe = tmp_path / "probe.cmake"
    probe.write_text(PROBE)
    for version in entry.checked_on:
        original = torch_tree(version, {SCA}) / SCA
        work = tmp_path / version / SCA
        work.parent.mkdir(parents=True)
        shutil.copy2(original, work)

        def run() -> subprocess.CompletedProcess[str]:
            return subprocess.run(["cmake", f"-DSCA={work}", "-P", str(probe)],  # noqa: B023
                                  capture_output=True, text=True, check=False)  # fmt: skip

        before = run()
        assert before.returncode != 0 and "Unknown CUDA Architecture Name" in before.stderr
        argv = ["patch", "-p1", "--fuzz=0", "-i", str(entry.patch_file)]
        patch = subprocess.run(argv, cwd=tmp_path / version, capture_output=True, text=True, check=False)
        assert patch.returncode == 0, patch.stdout
        after = run()
        assert after.returncode == 0, after.stderr
        assert "arch=compute_120,code=sm_120" in after.stdout
        assert "arch=compute_90a,code=sm_90a" in after.stdout


FIND_CUB = "cmake/Modules/FindCUB.cmake"
FIND_CUB_PROBE = """cmake_minimum_required(VERSION 3.18)
project(find_cub_probe NONE)
list(PREPEND CMAKE_MODULE_PATH "${MODULES}")
set(CUDA_TOOLKIT_INCLUDE "${CUDA_ROOT}/include")
find_package(CUB)
message(STATUS "CUB_INCLUDE_DIR=${CUB_INCLUDE_DIR}")
"""


def fake_cuda_root(root: Path, cub_under: str) -> Path:
    """A CUDA root whose only header is cub/cub.cuh under `cub_under` (include, or include/cccl for 13)."""
    header = root / cub_under / "cub" / "cub.cuh"
    header.parent.mkdir(parents=True)
    header.write_text("#pragma once\n")
    return root


def cub_dir_found(probe: Path, build: Path, modules: Path, cuda_root: Path) -> str:
    """CUB_INCLUDE_DIR as the FindCUB in `modules` sets it for `cuda_root`."""
    argv = ["cmake", "-S", str(probe), "-B", str(build), f"-DMODULES={modules}", f"-DCUDA_ROOT={cuda_root}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    return next(line for line in out.splitlines() if "CUB_INCLUDE_DIR=" in line).split("=", 1)[1]


FIND_CUB_ENTRIES = [e for e in CATALOG.entries if FIND_CUB in e.target_files]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
@pytest.mark.parametrize("entry", FIND_CUB_ENTRIES, ids=lambda e: e.id)
def test_patched_find_cub_finds_cuda_13s_cccl_layout_and_still_cuda_12s(entry, tmp_path):
    """Behaviour: the release's FindCUB misses include/cccl/cub (CUDA 13); patched it finds it, and a
    CUDA 12 layout still resolves to include/."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "CMakeLists.txt").write_text(FIND_CUB_PROBE)
    cuda13 = fake_cuda_root(tmp_path / "cuda13", "include/cccl")
    cuda12 = fake_cuda_root(tmp_path / "cuda12", "include")
    for version in entry.checked_on:
        source = real_pytorch_tree(version)
        if source is None:
            key = version.replace(".", "_")
            pytest.skip(f"set CONDAPIPE_PYTORCH_TREE_{key} (FindCUB.cmake is not in the wheel)")
        work = tmp_path / version
        modules = work / "cmake" / "Modules"
        modules.mkdir(parents=True)
        shutil.copy2(source / FIND_CUB, work / FIND_CUB)
        assert cub_dir_found(probe, tmp_path / "b", modules, cuda13) == "CUB_INCLUDE_DIR-NOTFOUND"
        patch = subprocess.run(["patch", "-p1", "--fuzz=0", "-i", str(entry.patch_file)],
                               cwd=work, capture_output=True, text=True, check=False)  # fmt: skip
        assert patch.returncode == 0, patch.stdout
        assert cub_dir_found(probe, tmp_path / "a13", modules, cuda13) == str(cuda13 / "include" / "cccl")
        assert cub_dir_found(probe, tmp_path / "a12", modules, cuda12) == str(cuda12 / "include")

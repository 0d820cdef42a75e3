"""Opt-in (`pytest -m upstream`): the probes behind pytorch.yaml's pairs beyond upstream.

Each probe checks, against real sources and toolchains, a fact that pytorch.yaml's
`cannot_compile` or `compiles_beyond_upstream` rests on (scripts/pytorch_pairs_results.md has
the outcomes). What they need, each skipping naming what is absent:

- CONDAPIPE_PYTORCH_SOURCE_1_13_1: the 1.13.1 sources, e.g. Debian's orig tarball unpacked
  (`apt-get source --download-only pytorch=1.13.1+dfsg-4`, bookworm deb-src);
  CONDAPIPE_PYTORCH_TREE_2_6_0: the real 2.6.0 tree (scripts/pytorch_tree/assemble.py).
- CONDAPIPE_CUDA_HOME_12_4 (default /opt/debian-cuda-12.4/cuda, scripts/cuda_toolchain_debian.sh)
  and CONDAPIPE_CUDA_HOME_13_0 (default /usr/local/cuda-13.0): CUDA roots with include/.
- CONDAPIPE_PYTORCH_FEEDSTOCK_GIT: a clone of conda-forge/pytorch-cpu-feedstock (full history).
- CONDAPIPE_TORCH_WHEEL_2_4_1 / _2_5_1: a torch wheel of that release (any platform: it carries
  the release's select_compute_arch.cmake and cpp_extension.py), e.g. `pip download torch==2.4.1
  --no-deps --platform macosx_11_0_arm64 --python-version 3.11 --only-binary=:all:`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from condapipe.buildspec import pairs

pytestmark = [pytest.mark.upstream, pytest.mark.timeout(600)]


def _path_from_env(name: str, default: str | None = None) -> Path:
    value = os.environ.get(name, default or "")
    if not value or not Path(value).exists():
        pytest.skip(f"set {name} (see this module's docstring)")
    return Path(value)


def _cuda_include(version: str, default: str) -> Path:
    root = _path_from_env(f"CONDAPIPE_CUDA_HOME_{version.replace('.', '_')}", default)
    if not (root / "include" / "cuda_profiler_api.h").is_file():
        pytest.skip(f"{root} has no include/cuda_profiler_api.h")
    return root / "include"


def _guard_of(text: str, needle: str) -> str:
    """The innermost #if line still open where `needle` first occurs."""
    stack: list[str] = []
    for line in text[: text.index(needle)].splitlines():
        stripped = line.strip()
        if stripped.startswith("#if"):
            stack.append(stripped)
        elif stripped.startswith("#endif") and stack:
            stack.pop()
    return stack[-1] if stack else ""


def _syntax_check(source: str, include: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("needs g++ (apt-get install g++)")
    probe = tmp_path / "probe.cpp"
    probe.write_text(source)
    return subprocess.run(
        [cxx, "-std=c++17", "-fsyntax-only", f"-I{include}", str(probe)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "cuda,default", [("12.4", "/opt/debian-cuda-12.4/cuda"), ("13.0", "/usr/local/cuda-13.0")]
)
def test_pytorch_1_13_binds_cuda_profiler_initialize_which_cuda_12_removed(
    cuda: str, default: str, tmp_path: Path
) -> None:
    src = _path_from_env("CONDAPIPE_PYTORCH_SOURCE_1_13_1")
    include = _cuda_include(cuda, default)
    cudart = (src / "torch/csrc/cuda/shared/cudart.cpp").read_text()
    # 1.13.1 binds it for every CUDA build: the only guard is the ROCm one (2.0 adds CUDA_VERSION < 12000)
    guard = _guard_of(cudart, "cudaProfilerInitialize")
    assert "USE_ROCM" in guard and "CUDA_VERSION" not in guard, guard
    # The binding's own expression, taken from the file, against this CUDA's headers (the include
    # lines are the file's own CUDA ones); the same probe without it compiles, so the failure is it.
    includes = "".join(line + "\n" for line in cudart.splitlines() if re.match(r"#include <cuda", line))
    body = "auto* probe = &cudaProfilerInitialize;\n"
    control = _syntax_check(includes + "int main() { return 0; }\n", include, tmp_path)
    assert control.returncode == 0, control.stderr
    result = _syntax_check(includes + body + "int main() { return 0; }\n", include, tmp_path)
    assert result.returncode != 0
    assert "cudaProfilerInitialize" in result.stderr and "not declared" in result.stderr, result.stderr
    verdict = pairs.pair_verdict("1.13.1", cuda)
    assert not verdict.offered and "cudaProfilerInitialize" in verdict.why


def test_pytorch_2_6_guards_the_binding_by_cuda_version() -> None:
    # The upstream fix (pytorch#91118 / #95582) the refusal of 1.x + CUDA 12 points to is in 2.x.
    tree = _path_from_env("CONDAPIPE_PYTORCH_TREE_2_6_0")
    cudart = (tree / "torch/csrc/cuda/shared/cudart.cpp").read_text()
    assert "CUDA_VERSION < 12000" in _guard_of(cudart, "cudaProfilerInitialize")


SELECT_COMPUTE_ARCH = "cmake/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake"


def _arch_flags(module: Path, arch: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """PyTorch's CUDA_SELECT_NVCC_ARCH_FLAGS from `module` for `arch` with CUDA 12.8 (cmake -P)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("needs cmake (pip install cmake)")
    script = tmp_path / "probe.cmake"
    script.write_text(
        'set(CUDA_VERSION "${PROBE_CUDA}")\ninclude("${PROBE_FILE}")\n'
        'CUDA_SELECT_NVCC_ARCH_FLAGS(flags "${PROBE_ARCH}")\nmessage(STATUS "FLAGS=${flags}")\n'
    )
    return subprocess.run(
        [cmake, "-DPROBE_CUDA=12.8", f"-DPROBE_ARCH={arch}", f"-DPROBE_FILE={module}", "-P", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pytorch_2_6_own_cmake_maps_arch_12_0_to_sm_120_with_cuda_12_8(tmp_path: Path) -> None:
    # 2.6.0 + CUDA 12.8 is offered as rendered: its own select_compute_arch.cmake (no catalog
    # patch) turns TORCH_CUDA_ARCH_LIST 12.0 into sm_120 and knows Blackwell for CUDA > 12.6.
    tree = _path_from_env("CONDAPIPE_PYTORCH_TREE_2_6_0")
    for arch, flag in (("12.0", "arch=compute_120,code=sm_120"), ("Blackwell", "code=sm_100")):
        run = _arch_flags(tree / SELECT_COMPUTE_ARCH, arch, tmp_path)
        assert run.returncode == 0 and flag in run.stdout, run.stdout + run.stderr
    assert pairs.pair_verdict("2.6.0", "12.8").kind == pairs.EVIDENCE


@pytest.mark.parametrize("version", ["2.4.1", "2.5.1"])
def test_the_catalog_patch_is_what_lets_2_4_and_2_5_take_arch_12_0_with_cuda_12_8(
    version: str, tmp_path: Path
) -> None:
    wheel = _path_from_env(f"CONDAPIPE_TORCH_WHEEL_{version.replace('.', '_')}")
    verdict = pairs.pair_verdict(version, "12.8")
    assert verdict.kind == pairs.PATCHED
    (entry_id,) = verdict.patches
    tree = tmp_path / "tree"
    target = tree / SELECT_COMPUTE_ARCH
    target.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as whl:
        target.write_bytes(whl.read(f"torch/share/cmake/Caffe2/{SELECT_COMPUTE_ARCH[len('cmake/') :]}"))
        extension = whl.read("torch/utils/cpp_extension.py").decode()
    # as the release ships it: the configure stops on arch 12.0
    before = _arch_flags(target, "12.0", tmp_path)
    assert before.returncode != 0 and "Unknown CUDA Architecture Name 12.0" in before.stderr, before.stderr
    # with the catalog entry the verdict names, applied as the recipe applies it: sm_120
    from condapipe.render.patch_catalog import load_catalog

    patch_file = load_catalog().get(entry_id).patch_file
    assert patch_file is not None
    applied = subprocess.run(
        ["patch", "-p1", "-i", str(patch_file)], cwd=tree, capture_output=True, text=True, timeout=60
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = _arch_flags(target, "12.0", tmp_path)
    assert after.returncode == 0 and "arch=compute_120,code=sm_120" in after.stdout, (
        after.stdout + after.stderr
    )
    # Not fixed by the catalog: torch's own cpp_extension still rejects 12.0 for a user's extension
    # build (condapipe's torchvision recipe passes -gencode flags around it); recorded, not asserted away.
    supported = re.search(r"supported_arches = \[([^\]]*)\]", extension)
    assert supported is not None and "'12.0'" not in supported.group(1)


def test_conda_forge_built_1_8_0_for_cuda_11_0_without_a_cuda_patch() -> None:
    repo = _path_from_env("CONDAPIPE_PYTORCH_FEEDSTOCK_GIT")

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=120
        ).stdout

    meta = git("show", "de47df8b:recipe/meta.yaml")
    assert '{% set version = "1.8.0" %}' in meta
    ci = git("ls-tree", "--name-only", "de47df8b", ".ci_support/").split()
    assert any(re.search(r"linux_64_cuda_compiler_version11\.0", name) for name in ci), ci
    patches = meta[meta.index("patches:") : meta.index("build:")]
    assert "cuda" not in patches.lower(), patches  # no patch is selected by (or about) the CUDA
    assert pairs.pair_verdict("1.8.0", "11.0").kind == pairs.EVIDENCE

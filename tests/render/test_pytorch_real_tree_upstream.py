"""Opt-in (`pytest -m upstream`): every seed cell's rendered build.sh against a real PyTorch tree.

For each cell (1.13.1 + CUDA 11.8, 2.6.0 + CUDA 12.4, 2.6.0 + CUDA 12.6, 2.6.0 + CUDA 12.8 with
--arch 12.0, 2.6.0 cpu, 2.6.0 + CUDA 13.0) the test

1. renders the recipe with the CLI (`condapipe render pytorch --version V --python 3.11 --cuda C`);
2. copies the real source tree (PyTorch configures in <tree>/build and writes into the tree), applies
   the recipe's source patches as conda-build would, and runs the RENDERED build.sh unchanged with the
   environment conda-build gives it (PREFIX, PYTHON, SRC_DIR, PKG_*, the variant keys of
   conda_build_config.yaml). Only its final build command is cut short: a `python` shim first on
   PATH turns `python setup.py install` / `python -m pip install .` into
   `setup.py build --cmake-only`, so the build stops at the end of CMake's configure;
3. reads the CMake summary and build/CMakeCache.txt (USE_CUDA, the arch flags, USE_CUDNN, USE_MAGMA,
   USE_NCCL, BLAS) and asserts them against the spec the test rendered, and that every optional
   dependency the profile decides off (`system_detected_off`: MPI, NUMA, ROCm, XPU) is OFF although
   the machine may have it (install libopenmpi-dev and libnuma-dev to make the check bite);
4. compiles the translation units that break first: a cub user (Nonzero.cu), a cuDNN user
   (Conv_v8.cpp), the magma user (cuda/linalg/BatchLinearAlgebra.cpp) and a small kernel
   (FillKernel.cu) whose object must hold every arch of the spec (cuobjdump); CPU cells compile
   BatchLinearAlgebra.cpp and mkl/SpectralOps.cpp. Each object is built with its own build.ninja
   command after ATen's codegen targets (`ninja <object>` would first build every order-only
   dependency of the library: XNNPACK, protobuf, NCCL for all archs), with ccache disabled.

The recipe declares no compilers, no nvcc and no cuDNN: the machine supplies them. What the test
needs, per cell (it skips naming what is absent):

- CONDAPIPE_PYTORCH_TREE_2_6_0 / CONDAPIPE_PYTORCH_TREE_1_13_1: the source trees (with submodules).
- CONDAPIPE_HOST_PYTHON_<CELL> (e.g. _2_6_0_CUDA12_4), else CONDAPIPE_HOST_PYTHON_2_6_0 /
  CONDAPIPE_HOST_PYTHON_1_13_1 (default: this interpreter): a Python
  (a venv) holding the recipe's host requirements: numpy, pyyaml, typing_extensions, setuptools, ninja,
  mkl-devel + mkl-include + mkl-static (the folder holding its lib/ and include/ is the host prefix), and
  for CUDA cells nvidia-cudnn-cuXX of the spec's cuDNN version. Offline, also `six`: NNPACK's configure
  downloads it otherwise, and without it every torch_cpu object waits on a failing peachpy step
  (recorded as nnpack_six in the JSON; the recipe's host requirements lack six).
- CONDAPIPE_CUDA_HOME_<X_Y> (default /usr/local/cuda-X.Y, /usr/local/cuda, /opt/debian-cuda-X.Y/cuda):
  a CUDA root whose bin/nvcc reports release X.Y. scripts/cuda_toolchain_debian.sh makes one for 11.8
  (Debian bookworm) or 12.4 (trixie) without conda. PyPI's nvidia-cuda-nvcc-cu12 wheels carry ptxas but
  no nvcc/cicc, so 12.6 / 12.8 need NVIDIA's toolkit. It becomes CUDA_HOME / CUDA_PATH, bin/ first on PATH.
- CONDAPIPE_CUDA_HOST_CXX_<X_Y> (default: g++ when that nvcc supports its major, else the newest
  g++-N it supports): becomes CUDAHOSTCXX.
- CONDAPIPE_MAGMA_ROOT_<X_Y> (default: /opt/debian-cuda-*/magma/usr or /opt/debian-magma-*/usr whose
  libmagma.so links libcudart of the same CUDA major): lib/libmagma.* and include/magma.h, linked into
  the host prefix as the magma-cudaXY package would be.
- CONDAPIPE_REAL_TREE_RESULTS (default <tmp>/condapipe-real-tree): one JSON per cell.
- CONDAPIPE_REAL_TREE_WORK (default pytest's tmp_path): where the tree is copied and configured.
- CONDAPIPE_REAL_TREE_JOBS (default: all cores): ninja -j for the codegen.
- CONDAPIPE_REAL_TREE_TUS (default: all): the roles to compile, e.g. `magma` (cub, cudnn, magma,
  arch; lapack, mkl for CPU cells) — a rerun that changes only the host prefix's magma.

2.6.0 + CUDA 13.0 must either be refused by the render (with the reason) or configure and compile.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from render_helpers import compiler_launchers, load_yaml, run_cli, v0_meta, variant_combos

from condapipe.facts.families import family_facts

pytestmark = [pytest.mark.upstream, pytest.mark.timeout(4 * 3600)]


@dataclass(frozen=True)
class Cell:
    id: str
    version: str
    cuda: str  # "cpu" or X.Y
    arch: str | None = None


CELLS = (
    Cell("1.13.1-cuda11.8", "1.13.1", "11.8"),
    # 2.6's official CUDA set is 11.8, 12.4, 12.6: 12.4 is the 12.x cell an offline machine can
    # compile (Debian trixie's nvcc 12.4; no nvcc 12.6/12.8 is obtainable without NVIDIA's installer)
    Cell("2.6.0-cuda12.4", "2.6.0", "12.4"),
    Cell("2.6.0-cuda12.6", "2.6.0", "12.6"),
    Cell("2.6.0-cuda12.8-arch12.0", "2.6.0", "12.8", "12.0"),
    Cell("2.6.0-cpu", "2.6.0", "cpu"),
    Cell("2.6.0-cuda13.0", "2.6.0", "13.0"),
)

# Newest GCC major each nvcc accepts as host compiler (CUDA installation guide, "host compiler support").
NVCC_MAX_GCC = {"11.8": 11, "12.4": 13, "12.6": 13, "12.8": 14, "13.0": 15}

# Translation units (tree-relative source paths, first existing candidate wins).
CUDA_TUS: dict[str, tuple[str, ...]] = {
    "cub": ("aten/src/ATen/native/cuda/Nonzero.cu", "aten/src/ATen/native/cuda/Sort.cu"),
    "cudnn": ("aten/src/ATen/native/cudnn/Conv_v8.cpp", "aten/src/ATen/native/cudnn/Conv_v7.cpp"),
    "magma": ("aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp",),
    "arch": ("aten/src/ATen/native/cuda/FillKernel.cu",),
}
CPU_TUS: dict[str, tuple[str, ...]] = {
    "lapack": ("aten/src/ATen/native/BatchLinearAlgebra.cpp",),
    "mkl": ("aten/src/ATen/native/mkl/SpectralOps.cpp",),
}
SHIM = """#!/bin/sh
# condapipe test shim for `python`: build.sh's build command stops after CMake's configure.
echo "$*" >> "{log}"
if [ "$1" = "setup.py" ] && [ "$2" = "install" ]; then
    exec "{real}" setup.py build --cmake-only
fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ] && [ "$3" = "install" ]; then
    exec "{real}" setup.py build --cmake-only
fi
exec "{real}" "$@"
"""


def _key(text: str) -> str:
    return text.replace(".", "_").replace("-", "_")


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


@dataclass
class Record:
    """What one cell did; written as JSON whatever the outcome."""

    cell: Cell
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data.update(
            cell=self.cell.id,
            version=self.cell.version,
            cuda=self.cell.cuda,
            arch=self.cell.arch,
            times={},
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )

    def write(self) -> Path:
        folder = Path(
            os.environ.get("CONDAPIPE_REAL_TREE_RESULTS")
            or Path(tempfile.gettempdir()) / "condapipe-real-tree"
        )
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / f"{self.cell.id}.json"
        out.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        return out


# --- prerequisites -------------------------------------------------------------------------------


def nvcc_release(cuda_home: Path) -> str | None:
    nvcc = cuda_home / "bin" / "nvcc"
    if not nvcc.is_file():
        return None
    proc = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"release (\d+\.\d+)", proc.stdout)
    return match[1] if match else None


def find_cuda_home(cuda: str) -> tuple[Path | None, str]:
    """The CUDA root for `cuda`, or None and why."""
    given = _env_path(f"CONDAPIPE_CUDA_HOME_{_key(cuda)}")
    candidates = (
        [given]
        if given
        else [
            Path(f"/usr/local/cuda-{cuda}"),
            Path("/usr/local/cuda"),
            Path(f"/opt/debian-cuda-{cuda}/cuda"),
        ]
    )
    seen = []
    for home in candidates:
        release = nvcc_release(home)
        seen.append(f"{home}: {release or 'no nvcc'}")
        if release == cuda:
            return home, ""
    why = (
        f"no nvcc of CUDA {cuda} (set CONDAPIPE_CUDA_HOME_{_key(cuda)}; looked at {'; '.join(seen)}). "
        "PyPI's nvidia-cuda-nvcc wheels hold ptxas but no nvcc/cicc; scripts/cuda_toolchain_debian.sh "
        "makes 11.8 and 12.4 from Debian, other releases need NVIDIA's toolkit"
    )
    return None, why


def find_host_cxx(cuda: str) -> tuple[str | None, str]:
    given = os.environ.get(f"CONDAPIPE_CUDA_HOST_CXX_{_key(cuda)}")
    if given:
        return (given, "") if shutil.which(given) else (None, f"host compiler {given} not found")
    newest = NVCC_MAX_GCC.get(cuda, 99)
    proc = subprocess.run(["g++", "-dumpversion"], capture_output=True, text=True, check=False)
    if proc.returncode == 0 and int(proc.stdout.split(".")[0]) <= newest:
        return "g++", ""
    for major in range(newest, 6, -1):
        if shutil.which(f"g++-{major}"):
            return f"g++-{major}", ""
    return None, f"nvcc {cuda} needs g++ <= {newest} (apt-get install g++-{newest})"


def find_magma(cuda: str) -> tuple[Path | None, str]:
    given = _env_path(f"CONDAPIPE_MAGMA_ROOT_{_key(cuda)}")
    candidates = [given] if given else []
    if not given:
        # scripts/cuda_toolchain_debian.sh X.Y DEST --magma puts it in DEST/magma/usr; any of the
        # same CUDA major does for configure and compile (nothing is linked here).
        for root in [
            Path(f"/opt/debian-cuda-{cuda}/magma/usr"),
            *sorted(Path("/opt").glob("debian-cuda-*/magma/usr")),
            *sorted(Path("/opt").glob("debian-magma-*/usr")),
        ]:
            if cuda.split(".")[0] in magma_cuda_majors(root):
                candidates.append(root)
    for root in candidates:
        if (root / "include" / "magma.h").is_file() and list((root / "lib").glob("libmagma.*")):
            return root, ""
    return None, (
        f"no magma for CUDA {cuda} (set CONDAPIPE_MAGMA_ROOT_{_key(cuda)} to a folder with "
        "lib/libmagma.* and include/magma.h; Debian bookworm contrib's libmagma-dev 2.6.2 is built "
        "for CUDA 11, trixie's 2.9.0 for CUDA 12)"
    )


def magma_cuda_majors(root: Path) -> set[str]:
    """CUDA majors a Debian libmagma.so was linked against (its libcudart.so.N)."""
    lib = root / "lib" / "libmagma.so"
    if not lib.exists():
        return set()
    proc = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=False)
    return set(re.findall(r"libcudart\.so\.(\d+)", proc.stdout))


def host_python(cell: Cell) -> Path:
    """The cell's own host python (CONDAPIPE_HOST_PYTHON_<CELL>, e.g. _2_6_0_CUDA12_4: cells of one
    release differ in their cuDNN wheel), else the release's, else this interpreter."""
    for key in (_key(cell.id).upper(), _key(cell.version)):
        given = _env_path(f"CONDAPIPE_HOST_PYTHON_{key}")
        if given:
            return given
    return Path(sys.executable)


def probe_host(python: Path) -> dict[str, Any]:
    code = (
        "import importlib, importlib.metadata as md, importlib.util, json, sys, sysconfig\n"
        "out = {'prefix': sys.prefix, 'purelib': sysconfig.get_paths()['purelib'], 'missing': []}\n"
        "for m in ('numpy', 'yaml', 'typing_extensions', 'setuptools'):\n"
        "    try: importlib.import_module(m)\n"
        "    except ImportError: out['missing'].append(m)\n"
        "out['six'] = importlib.util.find_spec('six') is not None\n"
        "out['cudnn'] = {d.metadata['Name']: d.version for d in md.distributions()\n"
        "                if (d.metadata['Name'] or '').startswith('nvidia-cudnn')}\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"host python {python} does not run: {proc.stderr[-300:]}")
    return json.loads(proc.stdout)


# --- render + run --------------------------------------------------------------------------------


def render(cell: Cell, out: Path) -> tuple[Any, dict[str, str]]:
    args = ["render", "pytorch", "--version", cell.version, "--python", "3.11", "--cuda", cell.cuda]
    if cell.arch:
        args += ["--arch", cell.arch]
    result = run_cli(*args, "-o", str(out))
    if result.exit_code != 0:
        return result, {}
    (variant,) = variant_combos(load_yaml((out / "conda_build_config.yaml").read_text()))
    return result, variant


def spec_exports(build_sh: str) -> dict[str, str]:
    """The constant `export NAME="value"` lines of the rendered build.sh (BLAS, ABI, ...)."""
    return dict(re.findall(r'^export ([A-Za-z_][A-Za-z0-9_]*)="([^"$]*)"$', build_sh, re.M))


def make_prefix(folder: Path, host_prefix: Path, magma: Path | None) -> None:
    """The host prefix conda-build would have: the host env's lib/ and include/ (mkl) plus magma."""
    for sub in ("lib", "include"):
        (folder / sub).mkdir(parents=True)
        sources = [host_prefix / sub] + ([magma / sub] if magma else [])
        for src in sources:
            if not src.is_dir():
                continue
            for entry in src.iterdir():
                if entry.name.startswith("python") or entry.name == "pkgconfig":
                    continue
                link = folder / sub / entry.name
                if not link.exists():
                    link.symlink_to(entry)


def copy_tree(tree: Path, dest: Path) -> None:
    subprocess.run(["cp", "-a", "--reflink=auto", str(tree), str(dest)], check=True)
    shutil.rmtree(dest / "build", ignore_errors=True)


def apply_patches(recipe: Path, variant: dict[str, str], src: Path) -> list[str]:
    meta = v0_meta(recipe, "linux-64", variant)
    patches = (meta.get("source") or {}).get("patches") or []
    for name in patches:
        subprocess.run(["patch", "-p1", "-i", str(recipe / name)], cwd=src, check=True, capture_output=True)
    return list(patches)


def run_build_sh(
    recipe: Path,
    src: Path,
    prefix: Path,
    work: Path,
    python: Path,
    variant: dict[str, str],
    toolchain: dict[str, str],
    extra: dict[str, str] | None = None,
) -> tuple[int, str, float]:
    shim_dir = work / "shim"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "python"
    shim.write_text(SHIM.format(log=work / "shim.log", real=python))
    shim.chmod(0o755)
    path = [str(shim_dir)]
    if toolchain.get("CUDA_HOME"):
        path.append(f"{toolchain['CUDA_HOME']}/bin")
    path += [str(python.parent), os.environ["PATH"]]
    env = {
        "PATH": os.pathsep.join(path),
        "HOME": os.environ.get("HOME", str(work)),
        "LANG": "C.UTF-8",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "CONDA_BUILD": "1",
        "PREFIX": str(prefix),
        "BUILD_PREFIX": str(prefix),
        "SRC_DIR": str(src),
        "RECIPE_DIR": str(recipe),
        "PYTHON": str(python),
        "PY_VER": "3.11",
        "PKG_NAME": "pytorch",
        "PKG_VERSION": variant.get("__version__", ""),
        "PKG_BUILDNUM": "0",
        "CPU_COUNT": str(os.cpu_count() or 1),
        "CCACHE_DISABLE": "1",
        **{k: v for k, v in variant.items() if k not in ("python", "__version__")},
        **toolchain,
        **(extra or {}),
    }
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", str(recipe / "build.sh")],
        cwd=src,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    (work / "build.log").write_text(proc.stdout)
    return proc.returncode, proc.stdout, time.monotonic() - started


# --- what CMake says -----------------------------------------------------------------------------


def parse_summary(log: str) -> dict[str, str]:
    """`--   NAME : value` lines after PyTorch's "******** Summary ********" (first value wins)."""
    out: dict[str, str] = {}
    _, _, tail = log.rpartition("******** Summary ********")  # the last one: PyTorch's (onnx prints one)
    for line in tail.splitlines():
        match = re.match(r"--\s+(\S[^:]*?)\s*:\s?(.*)$", line)
        if match:
            out.setdefault(match[1].strip(), match[2].strip())
        elif line.startswith("-- Configuring"):
            break
    gencode = re.search(r"-- Added CUDA NVCC flags for: (.*)", log)
    if gencode:
        out["CUDA NVCC flags for"] = gencode[1].strip()
    out["MAGMA found"] = "yes" if "Compiling with MAGMA support" in log else "no"
    return out


def parse_cache(cache: Path) -> dict[str, str]:
    out = {}
    for line in cache.read_text(errors="replace").splitlines():
        match = re.match(r"([A-Za-z_][A-Za-z0-9_\-]*):[A-Z]+=(.*)$", line)
        if match:
            out[match[1]] = match[2]
    return out


CACHE_KEYS = (
    "USE_CUDA",
    "USE_CUDNN",
    "USE_MAGMA",
    "USE_NCCL",
    "USE_STATIC_NCCL",
    "USE_STATIC_CUDNN",
    "USE_SYSTEM_NCCL",
    "BLAS",
    "TORCH_CUDA_ARCH_LIST",
    "BUILD_SPLIT_CUDA",
    "GLIBCXX_USE_CXX11_ABI",
    "CMAKE_ARGS",
    "CUDA_NVCC_FLAGS",
    "CMAKE_CUDA_FLAGS",
    "CMAKE_CUDA_HOST_COMPILER",
    "CUDA_HOST_COMPILER",
    "MAGMA_INCLUDE_DIR",
    "MAGMA_LIBRARIES",
    "CUDNN_LIBRARY_PATH",
    "CUDNN_INCLUDE_PATH",
    "TORCH_BUILD_VERSION",
    "BUILD_TEST",
    "CMAKE_BUILD_TYPE",
    "CUDAToolkit_NVCC_EXECUTABLE",
    "CUDA_NVCC_EXECUTABLE",
    "CUDA_TOOLKIT_ROOT_DIR",
)


def expected_codes(variant: dict[str, str]) -> set[str]:
    return set(variant["torch_arch_names"].split())


def on(value: str | None) -> bool:
    return (value or "").upper() in ("ON", "1", "TRUE", "YES")


def aten_config_leaks(build_sh: str, src: Path, site: Path) -> list[str]:
    """The ATenConfig.cmake this configure wrote, installed into a scratch site-packages and passed
    through the rendered build.sh's own relocation: it must name no build-tree path (the real 2.6.0
    package on the many-core machine was refused by verify for it)."""
    written = src / "build/caffe2/aten/src/ATen/cmake-exports/ATenConfig.cmake"
    if not written.is_file():
        return [f"no ATenConfig.cmake at {written}"]
    match = re.search(r"^condapipe_relocate_aten_config\(\) \{\n.*?^\}\n", build_sh, re.M | re.S)
    if match is None:
        return ["build.sh defines no condapipe_relocate_aten_config"]
    installed = site / "torch/share/cmake/ATen/ATenConfig.cmake"
    installed.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(written, installed)
    script = f"set -euo pipefail\n{match[0]}\ncondapipe_relocate_aten_config\n"
    env = {**os.environ, "SP_DIR": str(site), "SRC_DIR": str(src), "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", "-c", script], cwd=src, env=env, capture_output=True, text=True, check=False
    )
    text = installed.read_text()
    if proc.returncode != 0 or str(src) in text or str(src.resolve()) in text:
        return [f"ATenConfig.cmake still names the build tree (rc={proc.returncode}): {text.strip()[-300:]}"]
    return []


def check_against_spec(
    cell: Cell,
    variant: dict[str, str],
    exports: dict[str, str],
    summary: dict[str, str],
    cache: dict[str, str],
) -> list[str]:
    """Mismatches between CMake's view and the rendered spec."""
    bad = []
    cuda = cell.cuda != "cpu"

    def want(name: str, got: str | None, expect: bool) -> None:
        if on(got) != expect:
            bad.append(f"{name}: CMake has {got!r}, the spec wants {'ON' if expect else 'OFF'}")

    want("USE_CUDA", summary.get("USE_CUDA"), cuda)
    want("USE_NCCL", summary.get("USE_NCCL"), cuda)
    # Hermetic: what the machine has (OpenMPI, libnuma, ROCm, oneAPI) is decided off, not detected.
    # A name CMake reports nowhere would pass as "off": each must be in the summary or the cache.
    for name in family_facts("pytorch")["system_detected_off"]:
        got = summary.get(name, cache.get(name))
        if got is None:
            bad.append(f"{name}: neither the summary nor CMakeCache.txt reports it")
        want(name, got, False)
    # ...and the machine's ccache is not put in front of the compilers unless --compile-cache asks.
    if "USE_CCACHE" not in cache:
        bad.append("USE_CCACHE: CMakeCache.txt does not report it")
    want("USE_CCACHE", cache.get("USE_CCACHE"), False)
    if cuda:
        want("USE_CUDNN", summary.get("USE_CUDNN"), variant["cudnn_version"] != "none")
        want("USE_MAGMA", cache.get("USE_MAGMA"), variant["magma_package"] != "none")
        want("USE_STATIC_NCCL", cache.get("USE_STATIC_NCCL"), True)
        got_cudnn = summary.get("cuDNN version", "")
        if got_cudnn.split(".")[:2] != variant["cudnn_version"].split(".")[:2]:
            bad.append(f"cuDNN version: CMake found {got_cudnn}, the spec wants {variant['cudnn_version']}")
        codes = {
            c
            for c in re.split(
                r"[,;\s]+", " ".join(re.findall(r"code=([\w,\[\]]+)", summary.get("CUDA NVCC flags for", "")))
            )
            if c
        }
        codes = {c.strip("[]") for c in codes}
        if codes != expected_codes(variant):
            bad.append(
                f"arch flags: CMake has {sorted(codes)}, the spec wants {sorted(expected_codes(variant))}"
            )
        if summary.get("CUDA version", "").split(".")[:2] != cell.cuda.split("."):
            bad.append(f"CUDA version: CMake has {summary.get('CUDA version')!r}, the cell is {cell.cuda}")
        nvcc_flags = variant.get("torch_nvcc_flags", "none")
        seen_flags = " ".join(
            (
                cache.get("CUDA_NVCC_FLAGS", ""),
                cache.get("CMAKE_CUDA_FLAGS", ""),
                summary.get("CUDA flags", ""),
            )
        )
        if nvcc_flags != "none" and nvcc_flags.split()[-1] not in seen_flags:
            bad.append(
                f"TORCH_NVCC_FLAGS {nvcc_flags!r} reached neither CUDA_NVCC_FLAGS nor CMAKE_CUDA_FLAGS"
            )
    blas = exports.get("BLAS")
    if blas:
        if cache.get("BLAS", "").lower() != blas.lower():
            bad.append(f"BLAS: CMakeCache has {cache.get('BLAS')!r}, the spec exports {blas!r}")
        if summary.get("BLAS", "").lower() != blas.lower():
            bad.append(f"BLAS: the summary says {summary.get('BLAS')!r}, the spec exports {blas!r}")
    abi = exports.get("_GLIBCXX_USE_CXX11_ABI")
    if abi is not None and cache.get("GLIBCXX_USE_CXX11_ABI") != abi:
        bad.append(
            f"_GLIBCXX_USE_CXX11_ABI: CMakeCache has {cache.get('GLIBCXX_USE_CXX11_ABI')!r}, spec {abi}"
        )
    return bad


# --- compiles ------------------------------------------------------------------------------------


def ninja_outputs(build: Path) -> list[str]:
    proc = subprocess.run(
        ["ninja", "-C", str(build), "-t", "targets", "all"], capture_output=True, text=True, check=True
    )
    return [line.split(":", 1)[0] for line in proc.stdout.splitlines()]


def pick_target(src: Path, targets: list[str], candidates: tuple[str, ...]) -> tuple[str, str] | None:
    for rel in candidates:
        if not (src / rel).is_file():
            continue
        hits = [t for t in targets if t.endswith(f"/{rel}.o")]
        if hits:
            return rel, min(hits, key=len)
    return None


GEN_TARGETS = ("ATEN_CPU_FILES_GEN_TARGET", "ATEN_CUDA_FILES_GEN_TARGET")


# PyTorch's CMake puts ccache in front of the compilers when it finds one (USE_CCACHE, ON by
# default): compile times and outcomes here are the compiler's own.
NO_CCACHE = {**os.environ, "CCACHE_DISABLE": "1"}


def run_ninja(build: Path, *targets: str, jobs: int = 1) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ninja", "-C", str(build), f"-j{jobs}", *targets],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        env=NO_CCACHE,
    )


def plain(log: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[mK]", "", log)  # PyTorch compiles with -fdiagnostics-color=always


def error_lines(log: str) -> list[str]:
    return [line for line in plain(log).splitlines() if re.search(r"error|Error|FAILED", line)][:40]


def compile_tu(build: Path, target: str, outputs: list[str], jobs: int) -> dict[str, Any]:
    """Compile one object with its own build.ninja command, after ATen's codegen.

    `ninja <object>` would first build every order-only dependency of the library (XNNPACK's
    microkernels, protobuf and protoc, NCCL for all archs: hours on a small machine); the object's
    own command needs only the generated headers. A header still missing is built from the edge
    that produces it, and the compile retried.
    """
    started = time.monotonic()
    out: dict[str, Any] = {"target": target}
    gen = [t for t in GEN_TARGETS if t in outputs]
    proc = run_ninja(build, *gen, jobs=jobs)
    if proc.returncode != 0:
        out.update(ok=False, errors=error_lines(proc.stdout), log_tail=plain(proc.stdout)[-4000:])
        return out
    commands = subprocess.run(
        ["ninja", "-C", str(build), "-t", "commands", target], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    built_headers: list[str] = []
    for _ in range(8):
        proc = subprocess.run(
            commands[-1],
            shell=True,
            cwd=build,
            env=NO_CCACHE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        missing = re.search(r"fatal error: (\S+?): No such file", proc.stdout)
        producer = missing and next((o for o in outputs if o.endswith("/" + missing[1])), None)
        if proc.returncode == 0 or not producer or producer in built_headers:
            break
        built_headers.append(producer)
        run_ninja(build, producer, jobs=jobs)
    out.update(ok=proc.returncode == 0, seconds=round(time.monotonic() - started, 1))
    if built_headers:
        out["built_headers"] = built_headers
    if proc.returncode != 0:
        out.update(errors=error_lines(proc.stdout), log_tail=plain(proc.stdout)[-4000:])
    return out


def fatbin_codes(cuda_home: Path, obj: Path) -> set[str]:
    codes = set()
    for flag, kind in (("--list-elf", "sm"), ("--list-ptx", "compute")):
        proc = subprocess.run(
            [str(cuda_home / "bin" / "cuobjdump"), flag, str(obj)],
            capture_output=True,
            text=True,
            check=False,
        )
        codes |= {f"{kind}_{n}" for n in re.findall(r"\.sm_(\d+a?)\.", proc.stdout)}
    return codes


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_seed_cell_configures_and_compiles_against_the_real_tree(cell: Cell, tmp_path: Path) -> None:
    record = Record(cell)
    work = _env_path("CONDAPIPE_REAL_TREE_WORK")
    work = (work / cell.id) if work else tmp_path
    if work.exists() and work != tmp_path:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    recipe = work / "recipe"
    started = time.monotonic()
    result, variant = render(cell, recipe)
    record.data["times"]["render_s"] = round(time.monotonic() - started, 1)
    if result.exit_code != 0:
        # A refusal is an answer for a cell that cannot build, as long as it says why.
        record.data.update(outcome="refused", render_output=result.output[-3000:])
        record.write()
        assert re.search(r"CUB|CCCL|not supported|cannot|refuse", result.output, re.I), result.output
        return
    record.data["render_output"] = result.output[-2000:]
    variant["__version__"] = cell.version
    build_sh = (recipe / "build.sh").read_text()
    exports = spec_exports(build_sh)
    record.data["spec"] = {**{k: v for k, v in variant.items() if k != "__version__"}, "exports": exports}

    # Prerequisites, all named in the skip.
    missing = []
    tree = _env_path(f"CONDAPIPE_PYTORCH_TREE_{_key(cell.version)}")
    if not tree or not (tree / "setup.py").is_file():
        missing.append(f"CONDAPIPE_PYTORCH_TREE_{_key(cell.version)} (a PyTorch {cell.version} source tree)")
    elif not (tree / "version.txt").read_text().startswith(cell.version.rsplit(".", 1)[0]):
        missing.append(f"{tree}/version.txt is not {cell.version}")
    for tool in ("ninja", "patch", "g++", "readelf"):
        if shutil.which(tool) is None:
            missing.append(tool)
    python = host_python(cell)
    host = probe_host(python)
    if host["missing"]:
        missing.append(f"host python {python} lacks {host['missing']}")
    host_prefix = Path(host["prefix"])
    if exports.get("BLAS", "").upper() == "MKL" and not (host_prefix / "include" / "mkl.h").is_file():
        missing.append(f"MKL in the host prefix {host_prefix} (pip install mkl-devel mkl-include mkl-static)")
    toolchain: dict[str, str] = {}
    magma = None
    cuda_home = None
    if cell.cuda != "cpu":
        cuda_home, why = find_cuda_home(cell.cuda)
        if cuda_home is None:
            missing.append(why)
        else:
            toolchain.update(CUDA_HOME=str(cuda_home), CUDA_PATH=str(cuda_home))
        cxx, why = find_host_cxx(cell.cuda)
        if cxx is None:
            missing.append(why)
        else:
            toolchain["CUDAHOSTCXX"] = shutil.which(cxx) or cxx
        want = variant["cudnn_version"]
        have = [v for v in host["cudnn"].values() if v.startswith(want)]
        if want != "none" and not have:
            missing.append(f"nvidia-cudnn wheel {want} in the host python (has {host['cudnn'] or 'none'})")
        if variant["magma_package"] != "none":
            magma, why = find_magma(cell.cuda)
            if magma is None:
                missing.append(why)
    record.data["toolchain"] = {
        **toolchain,
        "host_python": str(python),
        "magma_root": str(magma),
        "host_cudnn": host["cudnn"],
    }
    if missing:
        record.data.update(outcome="skipped", missing=missing)
        record.write()
        pytest.skip(f"{cell.id}: missing " + "; ".join(missing))

    assert tree is not None
    src, prefix = work / "src", work / "prefix"
    started = time.monotonic()
    copy_tree(tree, src)
    record.data["patches"] = apply_patches(
        recipe, {k: v for k, v in variant.items() if k != "__version__"}, src
    )
    make_prefix(prefix, host_prefix, magma)
    record.data["times"]["copy_s"] = round(time.monotonic() - started, 1)

    extra = {"CONDAPIPE_CUDNN": "wheel"} if cell.cuda != "cpu" else {}
    rc, log, seconds = run_build_sh(recipe, src, prefix, work, python, variant, toolchain, extra)
    record.data["times"]["configure_s"] = round(seconds, 1)
    record.data["shim_calls"] = (
        (work / "shim.log").read_text().splitlines() if (work / "shim.log").exists() else []
    )
    cache_file = src / "build" / "CMakeCache.txt"
    summary = parse_summary(log)
    cache = parse_cache(cache_file) if cache_file.is_file() else {}
    record.data["summary"] = {
        k: summary[k]
        for k in summary
        if k
        in (
            "USE_CUDA",
            "Split CUDA",
            "USE_CUDNN",
            "CUDA version",
            "cuDNN version",
            "CUDA root directory",
            "CUDA NVCC flags for",
            "CUDA flags",
            "CUDA host compiler",
            "NVCC executable",
            "USE_BLAS",
            "BLAS",
            "USE_LAPACK",
            "LAPACK",
            "USE_NCCL",
            "USE_SYSTEM_NCCL",
            "USE_MKLDNN",
            "USE_MKL",
            "MAGMA found",
            "TORCH_VERSION",
            "C++ compiler version",
            "CMake version",
            "USE_EXPERIMENTAL_CUDNN_V8_API",
        )
    }
    record.data["cache"] = {k: cache[k] for k in CACHE_KEYS if k in cache}
    record.data["cmake_errors"] = re.findall(r"CMake Error.*(?:\n(?!--).*){0,6}", log)[:10]
    record.data["cmake_warnings_about_unused"] = re.findall(r"Manually-specified variables.*(?:\n .*)*", log)[
        :1
    ]
    reached = any(
        "--cmake-only" in c or "setup.py" in c or "pip install" in c for c in record.data["shim_calls"]
    )
    configured = rc == 0 and reached and cache_file.is_file() and (src / "build" / "build.ninja").is_file()
    record.data["configure_ok"] = configured
    if not configured:
        record.data["outcome"] = "configure failed"
        record.data["log_tail"] = log[-6000:]
        if cell.cuda == "13.0" and "Cannot find CUB" in log and cuda_home:
            # Where the cub users would break next: configure again with CCCL 3's include folder on
            # CMake's include path (what a user would try), and compile the cub user.
            diag = diagnose_past_cub(cell, tree, recipe, work, prefix, python, variant, toolchain, cuda_home)
            record.data["diagnosis_past_cub"] = diag
        out = record.write()
        pytest.fail(
            f"{cell.id}: build.sh failed before the end of CMake's configure (rc={rc}); "
            f"see {out}:\n" + "\n".join(record.data["cmake_errors"]) + "\n" + log[-2500:]
        )

    # NNPACK's CMake downloads `six` (pypi.python.org) for its peachpy step unless the Python has it;
    # offline, every torch_cpu object then fails behind it. The recipe's host requirements lack six.
    record.data["nnpack_six"] = {
        "download_failed": bool(re.search(r"FAILED: .*six-stamp/six-download", log)),
        "host_has_six": host["six"],
    }
    mismatches = check_against_spec(cell, variant, exports, summary, cache)
    mismatches += aten_config_leaks(build_sh, src, work / "aten-site")
    # ...and no third-party CMakeLists (XNNPACK: ccache, gloo: sccache) put the machine's compiler
    # cache in front of the compilers: without --compile-cache, no target has a launcher.
    mismatches += [f"compiler launcher {p} in build.ninja" for p in sorted(compiler_launchers(src / "build"))]
    record.data["spec_mismatches"] = mismatches
    record.write()

    jobs = int(os.environ.get("CONDAPIPE_REAL_TREE_JOBS", os.cpu_count() or 1))
    targets = ninja_outputs(src / "build")
    compiled: dict[str, Any] = {}
    started = time.monotonic()
    roles = CUDA_TUS if cell.cuda != "cpu" else CPU_TUS
    only = {r for r in os.environ.get("CONDAPIPE_REAL_TREE_TUS", "").split(",") if r}
    if only - set(roles):  # a typo must not pass a cell that compiled nothing
        pytest.fail(
            f"CONDAPIPE_REAL_TREE_TUS: {', '.join(sorted(only - set(roles)))} not among {', '.join(roles)}"
        )
    for role, candidates in roles.items():
        if only and role not in only:
            continue
        picked = pick_target(src, targets, candidates)
        if picked is None:
            compiled[role] = {"ok": False, "errors": [f"no object target for {candidates}"]}
            continue
        rel, target = picked
        compiled[role] = {"source": rel, **compile_tu(src / "build", target, targets, jobs)}
        if role == "arch" and compiled[role]["ok"] and cuda_home:
            codes = fatbin_codes(cuda_home, src / "build" / target)
            compiled[role]["fatbin"] = sorted(codes)
            lacking = expected_codes(variant) - codes
            if lacking:
                compiled[role]["ok"] = False
                compiled[role]["errors"] = [f"object lacks {sorted(lacking)}"]
        record.data["compiled"] = compiled
        record.write()
    record.data["times"]["compile_s"] = round(time.monotonic() - started, 1)
    failed = {role: c.get("errors", [])[:6] for role, c in compiled.items() if not c["ok"]}
    record.data["outcome"] = "ok" if not (failed or mismatches) else "failed"
    out = record.write()
    assert not mismatches, f"{cell.id}: CMake's configure disagrees with the spec ({out}): {mismatches}"
    assert not failed, f"{cell.id}: translation units failed ({out}): {json.dumps(failed, indent=1)[:4000]}"


def diagnose_past_cub(
    cell: Cell,
    tree: Path,
    recipe: Path,
    work: Path,
    prefix: Path,
    python: Path,
    variant: dict[str, str],
    toolchain: dict[str, str],
    cuda_home: Path,
) -> dict[str, Any]:
    """Configure once more with CMAKE_INCLUDE_PATH=<cuda>/include/cccl and compile the cub user."""
    diag_work = work / "past-cub"
    diag_work.mkdir()
    src = diag_work / "src"
    copy_tree(tree, src)
    apply_patches(recipe, {k: v for k, v in variant.items() if k != "__version__"}, src)
    extra = {"CONDAPIPE_CUDNN": "wheel", "CMAKE_INCLUDE_PATH": str(cuda_home / "include" / "cccl")}
    rc, log, seconds = run_build_sh(recipe, src, prefix, diag_work, python, variant, toolchain, extra)
    out: dict[str, Any] = {
        "extra_env": extra,
        "configure_rc": rc,
        "configure_s": round(seconds, 1),
        "cmake_errors": re.findall(r"CMake Error.*(?:\n(?!--).*){0,6}", log)[:10],
    }
    if rc != 0 or not (src / "build" / "build.ninja").is_file():
        out["log_tail"] = log[-4000:]
        return out
    outputs = ninja_outputs(src / "build")
    picked = pick_target(src, outputs, CUDA_TUS["cub"])
    if picked:
        jobs = int(os.environ.get("CONDAPIPE_REAL_TREE_JOBS", os.cpu_count() or 1))
        out["cub"] = {"source": picked[0], **compile_tu(src / "build", picked[1], outputs, jobs)}
    return out

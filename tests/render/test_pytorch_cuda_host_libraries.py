"""From CUDA 13.0 a PyTorch recipe takes cuBLAS & co., cuDNN and NCCL as host packages under
conda-forge's names, the toolkit from the machine, in both recipe formats; older CUDAs keep the
machine's libraries. 2.9.0 is the oldest release the tables offer with CUDA 13.0 as it stands."""

from __future__ import annotations

import subprocess
from pathlib import Path

from render_helpers import load_yaml, run_cli, v0_meta, v1_render, variant_combos

HOST = [
    "cuda-version 13.0.*", "libcublas-dev", "libcufft-dev", "libcurand-dev", "libcusolver-dev",
    "libcusparse-dev", "cuda-nvrtc-dev", "cuda-cudart-dev", "cuda-cupti-dev", "cuda-nvml-dev",
    "libcudnn-dev 9.*", "nccl",
]  # fmt: skip
RUN = ["libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse", "cuda-nvrtc", "cuda-cudart",
       "cuda-cupti", "libcudnn 9.*", "nccl"]  # fmt: skip


def _render(tmp_path: Path, *cudas: str) -> Path:
    out = tmp_path / "recipe"
    flags = [f for c in cudas for f in ("--cuda", c)]
    result = run_cli("render", "pytorch", "--version", "2.9.0", *flags, "--arch", "9.0", "--python", "3.12",
                     "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_cuda_13_host_and_run_requirements_in_both_formats(tmp_path: Path) -> None:
    out = _render(tmp_path, "13.0")
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    meta = v0_meta(out, "linux-64", variant_combos(cbc)[0])
    assert meta["requirements"]["host"][-len(HOST) :] == HOST
    assert all(dep in meta["requirements"]["run"] for dep in RUN), meta["requirements"]["run"]
    (rendered,) = v1_render(out, "linux-64")
    host = [str(d) for d in rendered.recipe.requirements.host]
    run = [str(d) for d in rendered.recipe.requirements.run]
    assert all(dep in host for dep in HOST), host
    assert all(dep in run for dep in RUN), run
    assert "cuda-version >=13.0,<13.1" in run  # the era, as before


def test_a_matrix_asks_for_them_only_in_its_cuda_13_variant(tmp_path: Path) -> None:
    out = _render(tmp_path, "12.8", "13.0")
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    by_cuda = {v["cuda_version"]: v0_meta(out, "linux-64", v) for v in variant_combos(cbc)}
    assert "libcublas-dev" in by_cuda["13.0"]["requirements"]["host"]
    assert not {"libcublas-dev", "nccl", "cuda-version 12.8.*"} & set(by_cuda["12.8"]["requirements"]["host"])
    assert "libcudnn 9.*" not in by_cuda["12.8"]["requirements"]["run"]


def test_build_sh_builds_one_cuda_root_from_the_toolkit_and_the_host_packages(tmp_path: Path) -> None:
    """The rendered block, run by bash: a toolkit folder (bin/nvcc, include/cuda_runtime.h) and a
    prefix laid out as conda-forge's packages (include/cublas_v2.h, lib/libcublas.so.13, ...) give one
    root whose include/ and lib64/ hold both, and the variables PyTorch's CMake reads point into it."""
    build_sh = (_render(tmp_path, "13.0") / "build.sh").read_text()
    start = build_sh.index('    case "${cuda_version}" in\n        13.0)')
    block = build_sh[start : build_sh.index("\n    esac\n", start) + len("\n    esac\n")]
    toolkit, prefix, src = tmp_path / "cuda-13.0", tmp_path / "prefix", tmp_path / "src"
    for folder in (toolkit / "bin", toolkit / "include", toolkit / "lib64", toolkit / "nvvm", src,
                   prefix / "include", prefix / "lib"):  # fmt: skip
        folder.mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (toolkit / "bin" / "nvcc").chmod(0o755)
    (toolkit / "include" / "cuda_runtime.h").write_text("toolkit\n")
    (toolkit / "lib64" / "libcudart.so.13").write_text("toolkit\n")
    headers = ["cublas_v2.h", "cufft.h", "curand.h", "cusolverDn.h", "cusparse.h", "nvrtc.h", "cudnn.h",
               "nccl.h", "nvml.h", "cuda_runtime.h"]  # fmt: skip
    for header in headers:
        (prefix / "include" / header).write_text("package\n")
    (prefix / "lib" / "libcudnn.so.9").write_text("package\n")
    (prefix / "lib" / "libcudnn.so").symlink_to("libcudnn.so.9")
    (toolkit / "lib64" / "stubs").mkdir()
    (toolkit / "lib64" / "stubs" / "libcuda.so").write_text("stub\n")
    script = (
        f"set -e\ncuda_version=13.0\nCUDA_HOME={toolkit}\nPREFIX={prefix}\nSRC_DIR={src}\n{block}"
        'printf "%s\\n" "$CUDA_HOME" "$CUDNN_LIBRARY" "$NCCL_INCLUDE_DIR" "$USE_SYSTEM_NCCL" "$CUDACXX"\n'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "condapipe-cuda-13.0"  # beside the source folder, not in it
    said, *values = done.stdout.splitlines()
    assert said == f"condapipe: CUDA 13.0: toolkit {toolkit}, libraries from the host packages ({root})"
    assert values == [str(root), f"{root}/lib64", f"{root}/include", "1", f"{root}/bin/nvcc"]
    assert (root / "include" / "cuda_runtime.h").read_text() == "toolkit\n"  # the toolkit's first
    assert (root / "include" / "cublas_v2.h").read_text() == "package\n"
    assert (root / "lib64" / "libcudnn.so").resolve() == (prefix / "lib" / "libcudnn.so.9")
    assert (root / "bin" / "nvcc").resolve() == toolkit / "bin" / "nvcc"
    assert (root / "lib64" / "stubs" / "libcuda.so").read_text() == "stub\n"
    # a library header neither has: one clear line, before any compile
    (prefix / "include" / "nccl.h").unlink()
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "nccl.h is in neither the toolkit" in done.stderr


# What the real 2.6.0 tree configured for CUDA 13.0 links from outside the package (its summary's
# Private CUDA Deps: curand, cufft, cublas, cudnn, nccl, cudart, cusparse; caffe2_nvrtc's NVRTC;
# cusolver for linalg; kineto's CUPTI: `CUDA_cupti_LIBRARY = <root>/lib/libcupti.so`).
CUDA_LINKED = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcufft.so.12", "libcurand.so.10",
               "libcusparse.so.12", "libcusolver.so.12", "libnvrtc.so.13", "libcupti.so.13", "libcudnn.so.9",
               "libnccl.so.2")  # fmt: skip


def test_every_cuda_library_the_package_links_comes_from_a_run_requirement(tmp_path: Path) -> None:
    from fnmatch import fnmatchcase

    from condapipe.verify.verifier import dependency_libs

    out = _render(tmp_path, "13.0")
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    provided = dependency_libs(v0_meta(out, "linux-64", variant_combos(cbc)[0])["requirements"]["run"])
    for lib in CUDA_LINKED:
        assert any(fnmatchcase(lib, pattern) for pattern in provided), lib

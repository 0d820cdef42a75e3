"""From CUDA 13.0 a torchvision recipe takes the CUDA libraries its build reads as host packages
under conda-forge's names (cudart, the cuBLAS/cuSPARSE/cuSOLVER headers torch's CUDAContext.h
includes, nvJPEG), the toolkit from the machine, and points CUDA_HOME at one root of both: setup.py
builds nvJPEG only when CUDA_HOME/include/nvjpeg.h exists and cpp_extension links -lcudart from
CUDA_HOME/lib64. 0.24.0 (torch 2.9.0) is a pair the tables offer with CUDA 13.0 as they stand."""

from __future__ import annotations

import subprocess
from pathlib import Path

from render_helpers import load_yaml, run_cli, v0_meta, v1_render, variant_combos

HOST = ["cuda-version 13.0.*", "cuda-cudart-dev", "libcublas-dev", "libcusolver-dev", "libcusparse-dev",
        "libnvjpeg-dev"]  # fmt: skip
HEADERS = ["cuda_runtime.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h", "cusparse.h", "nvjpeg.h"]


def _render(tmp_path: Path, *cudas: str) -> Path:
    out = tmp_path / "recipe"
    flags = [f for c in cudas for f in ("--cuda", c)]
    result = run_cli("render", "torchvision", "--version", "0.24.0", *flags, "--arch", "9.0", "--python",
                     "3.12", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_cuda_13_host_requirements_in_both_formats(tmp_path: Path) -> None:
    out = _render(tmp_path, "13.0")
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    meta = v0_meta(out, "linux-64", variant_combos(cbc)[0])
    assert meta["requirements"]["host"][-len(HOST) :] == HOST
    assert {"cuda-cudart", "libnvjpeg"} <= set(meta["requirements"]["run"])
    (rendered,) = v1_render(out, "linux-64")
    host = [str(d) for d in rendered.recipe.requirements.host]
    assert all(dep in host for dep in HOST), host


def test_a_cuda_12_variant_keeps_the_machines_libraries(tmp_path: Path) -> None:
    out = _render(tmp_path, "12.8", "13.0")
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    by_cuda = {v["cuda_version"]: v0_meta(out, "linux-64", v) for v in variant_combos(cbc)}
    assert "libnvjpeg-dev" in by_cuda["13.0"]["requirements"]["host"]
    assert not set(HOST) & set(by_cuda["12.8"]["requirements"]["host"])


def _root_block(tmp_path: Path) -> str:
    build_sh = (_render(tmp_path, "13.0") / "build.sh").read_text()
    start = build_sh.index('    case "${cuda_version}" in\n        13.0)')
    return build_sh[start : build_sh.index("\n    esac\n", start) + len("\n    esac\n")]


def test_build_sh_points_cuda_home_at_one_root_with_nvjpeg_from_the_host_packages(tmp_path: Path) -> None:
    """The rendered block, run by bash: a toolkit folder (bin/nvcc, cudart) and a prefix laid out as
    conda-forge's packages give one root holding nvjpeg.h and libnvjpeg.so, which is what setup.py's
    nvJPEG check and the link of torchvision.image look for under CUDA_HOME."""
    block = _root_block(tmp_path)
    toolkit, prefix, src = tmp_path / "cuda-13.0", tmp_path / "prefix", tmp_path / "src"
    for folder in (toolkit / "bin", toolkit / "include", toolkit / "lib64" / "stubs", src, prefix / "include",
                   prefix / "lib"):  # fmt: skip
        folder.mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (toolkit / "bin" / "nvcc").chmod(0o755)
    (toolkit / "include" / "cuda_runtime.h").write_text("toolkit\n")
    (toolkit / "lib64" / "libcudart.so").write_text("toolkit\n")
    (toolkit / "lib64" / "stubs" / "libcuda.so").write_text("stub\n")
    for header in HEADERS[1:]:
        (prefix / "include" / header).write_text("package\n")
    (prefix / "lib" / "libnvjpeg.so.13").write_text("package\n")
    (prefix / "lib" / "libnvjpeg.so").symlink_to("libnvjpeg.so.13")
    script = (
        f"set -e\ncuda_version=13.0\nCUDA_HOME={toolkit}\nPREFIX={prefix}\nSRC_DIR={src}\n{block}"
        'printf "%s\\n" "$CUDA_HOME" "$(command -v nvcc)"\n'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "condapipe-cuda-13.0"
    said, *values = done.stdout.splitlines()
    assert said == f"condapipe: CUDA 13.0: toolkit {toolkit}, libraries from the host packages ({root})"
    assert values == [str(root), f"{root}/bin/nvcc"]
    assert (root / "include" / "nvjpeg.h").read_text() == "package\n"
    assert (root / "lib64" / "libnvjpeg.so").resolve() == prefix / "lib" / "libnvjpeg.so.13"
    assert (root / "lib64" / "libcudart.so").read_text() == "toolkit\n"
    # without the nvJPEG package setup.py would quietly build no GPU decoder: one line, no compile
    (prefix / "include" / "nvjpeg.h").unlink()
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "nvjpeg.h is in neither the toolkit" in done.stderr


def test_every_cuda_library_torchvision_links_comes_from_a_run_requirement(tmp_path: Path) -> None:
    """_C.so links libcudart (cpp_extension), image.so libnvjpeg and libcudart; the rest of CUDA
    reaches them through libtorch_cuda, whose package brings it."""
    from fnmatch import fnmatchcase

    from condapipe.verify.verifier import dependency_libs

    out = _render(tmp_path, "13.0")
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    provided = dependency_libs(v0_meta(out, "linux-64", variant_combos(cbc)[0])["requirements"]["run"])
    for lib in ("libcudart.so.13", "libnvjpeg.so.13"):
        assert any(fnmatchcase(lib, pattern) for pattern in provided), lib

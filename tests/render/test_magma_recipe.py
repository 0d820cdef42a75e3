"""The magma recipe builds what pytorch links, with tools found offline, from a tree or a tarball.

What a real build taught (issue 13): magma_sparse does not compile against cuSPARSE >= 11/12 and
the testers need a CPU LAPACK, so only the `magma` library target is built; CMake 4 rejects the
CMP0037 line of 2.6-2.9; dropping magma's *gemv_fermi.cu for CUDA 12 left magmablas_zgemv undefined.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from condapipe.cli.main import main
from condapipe.hashing import hash_file


def _render(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "recipe"
    result = CliRunner().invoke(main, ["render", "magma", *args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_only_the_static_pic_magma_library_is_built_with_cmake_and_ninja(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "--cuda", "13.0", "--arch", "9.0")
    build = (recipe / "build.sh").read_text()
    assert "cmake --build build --target magma " in build
    assert "-DBUILD_SHARED_LIBS=OFF" in build and "-DCMAKE_POSITION_INDEPENDENT_CODE=ON" in build
    assert "make install" not in build and "make -j" not in build and "--target magma_sparse" not in build
    assert 'cp build/lib/libmagma.a "${PREFIX}/lib/"' in build
    v1 = (recipe / "recipe.yaml").read_text()
    assert '- "cmake"\n    - "ninja"' in v1
    assert '"bash test/run_test.sh"' in v1 and (recipe / "test" / "magma_dgesv_test.cpp").is_file()


@pytest.mark.parametrize(
    ("cuda", "has_cmp0037_patch"),
    [("13.0", True), ("12.4", True), ("11.8", True), ("11.0", False)],  # 2.6.1 / 2.6.1 / 2.6.1 / 2.5.2
)
def test_the_cmake4_cmp0037_patch_follows_the_magma_version(
    tmp_path: Path, cuda: str, has_cmp0037_patch: bool
) -> None:
    recipe = _render(tmp_path, "--cuda", cuda)
    assert ("cmake4-drop-cmp0037-old.patch" in (recipe / "recipe.yaml").read_text()) is has_cmp0037_patch


def test_cuda12_keeps_the_gemm_kernels_on_their_texture_free_path(tmp_path: Path) -> None:
    recipe = _render(tmp_path, "--cuda", "12.4")
    patch = (recipe / "cuda12-fermi-gemm-no-texture-2.6.patch").read_text()
    # no source file is left out of the build (magmablas_?gemm lives only in ?gemm_fermi.cu) ...
    assert "EXCLUDE" not in patch and "CMakeLists" not in patch
    # ... the texture path is only taken where texture references still exist
    assert patch.count("#if defined(MAGMA_HAVE_CUDA) && CUDA_VERSION < 12000") == 4


def test_a_release_tarball_is_a_source_too(tmp_path: Path) -> None:
    tree = tmp_path / "magma-2.6.1"
    tree.mkdir()
    (tree / "CMakeLists.txt").write_text(
        "project(magma)\n"
        "set( MAGMA_VERSION_MAJOR 2 )\nset( MAGMA_VERSION_MINOR 6 )\nset( MAGMA_VERSION_MICRO 1 )\n"
    )
    tarball = tmp_path / "magma-2.6.1.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tree, arcname="magma-2.6.1")
    v1 = (_render(tmp_path, "--cuda", "13.0", "--source", str(tarball)) / "recipe.yaml").read_text()
    assert f'url: "{tarball.resolve().as_uri()}"' in v1
    assert f'sha256: "{hash_file(tarball).sha256}"' in v1


def test_a_source_that_is_neither_a_directory_nor_an_archive_is_one_line_exit_2(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("x")
    result = CliRunner().invoke(main, ["render", "magma", "--cuda", "13.0", "--source", str(junk), "-o", "x"])
    assert result.exit_code == 2
    assert "no such directory (or source archive" in result.output and "Traceback" not in result.output


def _package_test(tmp_path: Path, files: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the rendered package test against a prefix holding `files`, with no nvcc on PATH."""
    recipe = _render(tmp_path, "--cuda", "13.0", "--arch", "9.0")
    prefix = tmp_path / "prefix"
    for rel in files:
        (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
        (prefix / rel).write_bytes(b"!<arch>\n" if rel.endswith(".a") else b"/* */\n")
    env = {"PATH": "/usr/bin:/bin", "PREFIX": str(prefix), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        ["bash", str(recipe / "test" / "run_test.sh")], capture_output=True, text=True, env=env, check=False
    )


def test_package_test_checks_the_shape_and_says_why_it_skips_the_program(tmp_path: Path) -> None:
    done = _package_test(tmp_path, ["lib/libmagma.a", "include/magma_v2.h"])
    assert done.returncode == 0, done.stderr
    assert "no shared library, no magma_sparse" in done.stdout
    assert "no nvcc or g++ on PATH: magma_dgesv_gpu test program skipped" in done.stdout


@pytest.mark.parametrize("extra", ["lib/libmagma.so", "lib/libmagma_sparse.a"])
def test_package_test_fails_a_shared_or_sparse_magma(tmp_path: Path, extra: str) -> None:
    done = _package_test(tmp_path, ["lib/libmagma.a", "include/magma_v2.h", extra])
    assert done.returncode != 0


@pytest.mark.parametrize("cuda", ["11.0", "11.8", "13.0"])
def test_render_magma_numbers_the_package_as_the_pytorch_plan_expects_it(cuda: str, tmp_path: Path) -> None:
    """One source: the CUDA table's magma build number (magma-cuda118 2.6.1 is build 1). `render
    magma` and the pytorch plan's magma prerequisite both take it from build_spec."""
    from condapipe.buildspec.family_specs import prerequisite_spec
    from condapipe.buildspec.settings import spec_from_flags
    from condapipe.facts import tables

    rendered = spec_from_flags("magma", {"cuda": [cuda]})
    pytorch = spec_from_flags(
        # a release offered with that CUDA (1.13.1 + 11.0 is not: nothing shows it compiles)
        "pytorch",
        {
            "version": {"13.0": "2.9.0", "11.0": "1.8.0"}.get(cuda, "1.13.1"),
            "cuda": [cuda],
            "python": ["3.9" if cuda == "11.0" else "3.10"],
        },
    )
    planned = prerequisite_spec("magma", pytorch, pytorch.cuda_variants[0])
    table = tables.cuda_info(cuda).magma
    assert rendered.build_number == planned.build_number == table.build_number == 1
    assert (rendered.version, planned.version) == (table.version, table.version)
    # An explicit --build-number wins; a magma version the table does not name starts at 0.
    assert spec_from_flags("magma", {"cuda": [cuda], "build_number": "4"}).build_number == 4
    assert spec_from_flags("magma", {"cuda": [cuda], "version": "2.7.1"}).build_number == 0

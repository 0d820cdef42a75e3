"""defines_symbol finds a function a static archive left in a shared library, in .dynsym or, when
it is not exported, in .symtab; an undefined reference or a name that only ends the same does not
count. The libraries are real gcc output."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elfkit import gcc_shared, run

from condapipe.elf.reader import ElfFile
from condapipe.elf.symbols import defines_symbol

SOURCE = """
int magma_init(void) { return 0; }
__attribute__((visibility("hidden"))) int magma_hidden(void) { return 1; }
extern int magma_elsewhere(void);
int xmagma_only_suffix(void) { return magma_elsewhere() + magma_hidden(); }
"""


def test_exported_hidden_undefined_and_suffix_names(tmp_path: Path) -> None:
    lib = gcc_shared(tmp_path / "libdemo.so", SOURCE)
    with ElfFile(lib) as elf:
        assert defines_symbol(elf, "magma_init")  # exported: .dynsym
        assert defines_symbol(elf, "magma_hidden")  # not exported: .symtab only
        assert not defines_symbol(elf, "magma_elsewhere")  # referenced, not defined
        assert not defines_symbol(elf, "magma_only_suffix")  # the tail of another name
        assert not defines_symbol(elf, "cublasCreate_v2")


def test_a_stripped_library_still_shows_what_it_exports(tmp_path: Path) -> None:
    lib = gcc_shared(tmp_path / "libdemo.so", SOURCE)
    run("strip", "--strip-all", lib)
    with ElfFile(lib) as elf:
        assert defines_symbol(elf, "magma_init")
        assert not defines_symbol(elf, "magma_hidden")  # its only trace was .symtab


CACHE = Path(os.environ.get("CONDAPIPE_UPSTREAM_CACHE", Path.home() / ".cache" / "condapipe-upstream"))


@pytest.mark.upstream
def test_pypi_torch_2_6_cuda_wheel_defines_magma_init_in_its_linalg_library(tmp_path: Path) -> None:
    """The marker verify asks for (recipes/magma/family.yaml static_symbol) is what upstream's own
    CUDA build of 2.6.0 holds: magma linked statically into libtorch_cuda_linalg.so."""
    folder = CACHE / "wheels" / "torch-2.6.0-cu124"
    folder.mkdir(parents=True, exist_ok=True)
    if not list(folder.glob("torch-2.6.0-*.whl")):
        argv = [sys.executable, "-m", "pip", "download", "torch==2.6.0", "--no-deps", "-q",
                "--only-binary=:all:", "--python-version", "3.12", "--platform", "manylinux1_x86_64",
                "-d", str(folder)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-400:]
    (wheel,) = folder.glob("torch-2.6.0-*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extract("torch/lib/libtorch_cuda_linalg.so", tmp_path)
        z.extract("torch/lib/libtorch_cpu.so", tmp_path)
    with ElfFile(tmp_path / "torch/lib/libtorch_cuda_linalg.so") as elf:
        assert defines_symbol(elf, "magma_init")
    with ElfFile(tmp_path / "torch/lib/libtorch_cpu.so") as elf:
        assert not defines_symbol(elf, "magma_init")

"""`condapipe verify`: a clean package passes; each planted defect is caught."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from elfkit import LIB_SRC, NVCC, USER_SRC, gcc_shared, make_package, nvcc_shared, write_metadata

from condapipe.cli.main import main
from condapipe.elf.fatbin import read_fatbin
from condapipe.facts.arch import parse_arch_list
from condapipe.verify.verifier import verify_package

BUILD = "/home/ci/conda-bld/demo_1700000000/_h_env_placehold_placehold_placehold_placehold"
has_nvcc = pytest.mark.skipif(not Path(NVCC).exists(), reason="nvcc not installed")


@pytest.fixture(scope="session")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compiled once: a clean library pair, a CUDA library (sm_80 + compute_90 PTX, compressed)."""
    d = tmp_path_factory.mktemp("parts")
    gcc_shared(d / "libgreet.so", LIB_SRC, soname="libgreet.so", rpath="$ORIGIN")
    gcc_shared(
        d / "libuser.so", USER_SRC, soname="libuser.so", libs=("libgreet.so",), libdirs=(d,), rpath="$ORIGIN"
    )
    gcc_shared(d / "libabs.so", LIB_SRC, rpath=f"{BUILD}/lib")
    gcc_shared(d / "libmissing.so.1", LIB_SRC, soname="libmissing.so.1")
    gcc_shared(
        d / "libneedsmissing.so",
        USER_SRC,
        libs=("libmissing.so.1", "libgreet.so"),
        libdirs=(d,),
        rpath="$ORIGIN",
    )
    if Path(NVCC).exists():
        nvcc_shared(
            d / "libkern.so",
            ("arch=compute_80,code=sm_80", "arch=compute_90,code=compute_90"),
            ("-Xfatbin", "-compress-all", "-Xlinker", "-rpath=$ORIGIN"),
        )
    return d


def _package(
    parts: Path,
    tmp_path: Path,
    plant: Callable[[Path], None] | None = None,
    after: Callable[[Path], None] | None = None,
    *,
    cuda: bool = False,
    placeholders: dict[str, str] | None = None,
    depends: tuple[str, ...] = (),
) -> Path:
    """Build a package from the clean parts; `plant` edits the tree before metadata, `after` after."""
    root = tmp_path / "tree"
    (root / "lib").mkdir(parents=True)
    for name in ("libgreet.so", "libuser.so"):
        shutil.copy(parts / name, root / "lib" / name)
    if cuda:
        shutil.copy(parts / "libkern.so", root / "lib" / "libkern.so")
    (root / "share").mkdir()
    (root / "share" / "demo.cmake").write_text('set(DEMO_LIB "${CMAKE_CURRENT_LIST_DIR}/../lib")\n')
    if plant:
        plant(root)
    write_metadata(root, depends=depends, placeholders=placeholders)
    if after:
        after(root)
    return make_package(root, tmp_path / "demo-1.0-0.conda")


def test_a_clean_package_passes(parts: Path, tmp_path: Path) -> None:
    report = verify_package(_package(parts, tmp_path))
    assert report.ok, report.errors
    assert report.files_checked == 3 and report.elf_files == 2


def test_absolute_build_rpath_is_caught(parts: Path, tmp_path: Path) -> None:
    pkg = _package(parts, tmp_path, lambda r: shutil.copy(parts / "libabs.so", r / "lib" / "libabs.so"))
    errors = verify_package(pkg).errors
    assert errors == [
        f"lib/libabs.so: rpath entry {BUILD}/lib is not $ORIGIN-relative (links to the build machine)"
    ]


def test_rpath_leaving_the_prefix_is_caught(parts: Path, tmp_path: Path) -> None:
    def plant(root: Path) -> None:
        gcc_shared(root / "lib" / "libescape.so", LIB_SRC, rpath="$ORIGIN/../../outside")

    errors = verify_package(_package(parts, tmp_path, plant)).errors
    assert any("leaves the prefix" in e for e in errors)


def test_missing_library_is_caught_and_a_run_dependency_can_provide_it(parts: Path, tmp_path: Path) -> None:
    def plant(root: Path) -> None:
        shutil.copy(parts / "libneedsmissing.so", root / "lib" / "libneedsmissing.so")

    errors = verify_package(_package(parts, tmp_path / "a", plant)).errors
    assert len(errors) == 1 and "lib/libneedsmissing.so: needs libmissing.so.1" in errors[0]
    assert verify_package(_package(parts, tmp_path / "b", plant), dep_libs=("libmissing.so.*",)).ok


def test_libraries_of_declared_run_dependencies_resolve(parts: Path, tmp_path: Path) -> None:
    def plant(root: Path) -> None:
        gcc_shared(parts / "stub" / "libcudart.so.12", LIB_SRC, soname="libcudart.so.12")
        gcc_shared(
            root / "lib" / "libcu.so",
            USER_SRC,
            libs=("libcudart.so.12",),
            libdirs=(parts / "stub",),
            rpath="$ORIGIN",
        )

    assert not verify_package(_package(parts, tmp_path / "a", plant)).ok
    assert verify_package(_package(parts, tmp_path / "b", plant, depends=("cuda-cudart >=12.4,<13",))).ok


def test_tampered_file_is_caught(parts: Path, tmp_path: Path) -> None:
    def tamper(root: Path) -> None:
        data = bytearray((root / "lib" / "libgreet.so").read_bytes())
        data[100] ^= 0xFF
        (root / "lib" / "libgreet.so").write_bytes(bytes(data))
        with open(root / "share" / "demo.cmake", "a") as fh:
            fh.write("# appended\n")

    errors = verify_package(_package(parts, tmp_path, after=tamper)).errors
    assert "lib/libgreet.so: sha256 differs from paths.json (file was modified)" in errors
    assert any(e.startswith("share/demo.cmake: size") for e in errors)


def test_unlisted_and_missing_files_are_caught(parts: Path, tmp_path: Path) -> None:
    def after(root: Path) -> None:
        (root / "share" / "extra.txt").write_text("smuggled\n")
        (root / "lib" / "libuser.so").unlink()

    errors = verify_package(_package(parts, tmp_path, after=after)).errors
    assert "share/extra.txt: shipped but not listed in paths.json" in errors
    assert "lib/libuser.so: listed in paths.json but missing from the package" in errors


def test_text_file_naming_the_build_prefix_is_caught_unless_declared(parts: Path, tmp_path: Path) -> None:
    def plant(root: Path) -> None:
        (root / "share" / "demo.pc").write_text(f"prefix={BUILD}\nlibdir=${{prefix}}/lib\n")
        (root / "share" / "build-info.txt").write_text("built in /srv/ci/work/demo\n")

    pkg = _package(parts, tmp_path / "a", plant)
    errors = verify_package(pkg).errors
    assert [e.split(";")[0] for e in errors] == [f"share/demo.pc: mentions the build machine path {BUILD}"]
    assert errors[0].endswith(
        "(conda-build: build/ignore_prefix_files; rattler-build: build/prefix_detection/ignore)"
    )
    # an explicitly named work directory is caught too
    errors = verify_package(pkg, build_prefixes=("/srv/ci/work",)).errors
    assert "share/build-info.txt: mentions the build machine path /srv/ci/work" in [
        e.split(";")[0] for e in errors
    ]
    declared = _package(parts, tmp_path / "b", plant, placeholders={"share/demo.pc": BUILD})
    assert verify_package(declared).ok


def test_absolute_symlink_is_caught(parts: Path, tmp_path: Path) -> None:
    pkg = _package(parts, tmp_path, lambda r: (r / "lib" / "libsys.so").symlink_to("/usr/lib/libz.so"))
    errors = verify_package(pkg).errors  # refused while unpacking, the member named
    assert errors == [
        f"{pkg}: member lib/libsys.so is a symlink that points to the absolute path /usr/lib/libz.so"
    ]
    tree_errors = verify_package(tmp_path / "tree").errors  # an unpacked folder is still checked
    assert "lib/libsys.so: symlink to absolute path /usr/lib/libz.so" in tree_errors


@has_nvcc
def test_cuda_archs_present_pass_and_extra_ones_warn(parts: Path, tmp_path: Path) -> None:
    pkg = _package(parts, tmp_path, cuda=True)
    report = verify_package(pkg, archs=parse_arch_list("8.0"))
    assert report.ok, report.errors
    assert report.warnings == ["lib/libkern.so: extra CUDA archs compute_90 not in the arch list"]
    assert report.fatbins["lib/libkern.so"]["sass"] == ["sm_80"]
    assert verify_package(pkg, archs=parse_arch_list("8.0"), deep=True).ok  # payloads decode to sm_80/PTX
    assert verify_package(pkg, archs=parse_arch_list("8.0;9.0+PTX")).errors == [
        "lib/libkern.so: missing CUDA archs sm_90 (has sm_80, compute_90)"
    ]


@has_nvcc
@pytest.mark.parametrize(
    ("archs", "missing"), [("8.0;8.6", "sm_86"), ("8.0+PTX", "compute_80"), ("9.0a", "sm_90a")]
)
def test_missing_or_wrong_cuda_arch_is_caught(parts: Path, tmp_path: Path, archs: str, missing: str) -> None:
    errors = verify_package(_package(parts, tmp_path, cuda=True), archs=parse_arch_list(archs)).errors
    assert len(errors) == 1 and f"missing CUDA archs {missing}" in errors[0]


@has_nvcc
def test_deep_check_finds_a_corrupted_compressed_kernel(parts: Path, tmp_path: Path) -> None:
    def corrupt(root: Path) -> None:
        lib = root / "lib" / "libkern.so"
        entry = next(e for e in read_fatbin(lib).entries if e.kind == 2)
        with open(lib, "r+b") as fh:
            fh.seek(entry.offset + 8)  # just past the zstd frame header
            garbled = bytes(b ^ 0x5A for b in fh.read(8))
            fh.seek(-8, os.SEEK_CUR)
            fh.write(garbled)

    pkg = _package(parts, tmp_path, plant=corrupt, cuda=True)
    assert verify_package(pkg, archs=parse_arch_list("8.0")).ok  # headers intact: archs look fine
    errors = verify_package(pkg, archs=parse_arch_list("8.0"), deep=True).errors
    assert len(errors) == 1 and "lib/libkern.so: sm_80 payload is corrupt" in errors[0]


def test_cli_reports_defects_with_exit_1_and_json(parts: Path, tmp_path: Path) -> None:
    pkg = _package(parts, tmp_path, lambda r: shutil.copy(parts / "libabs.so", r / "lib" / "libabs.so"))
    result = CliRunner().invoke(main, ["verify", str(pkg)])
    assert result.exit_code == 1
    assert "not $ORIGIN-relative" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["verify", str(pkg), "--json"])
    data = json.loads(result.output[: result.output.rindex("]") + 1])
    assert data[0]["ok"] is False and len(data[0]["errors"]) == 1


def test_cli_passes_a_clean_package(parts: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(_package(parts, tmp_path))])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", "/nonexistent.conda"], "no such package"),
        (["verify", "/etc/hostname"], "not a conda package"),
        (["verify", "/nonexistent.conda", "--arch", "8.0;banana"], "banana"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


@has_nvcc
def test_cli_checks_archs_against_the_cuda_version(parts: Path, tmp_path: Path) -> None:
    pkg = str(_package(parts, tmp_path, cuda=True))
    ok = CliRunner().invoke(main, ["verify", pkg, "--cuda", "13.0", "--arch", "8.0", "--deep"])
    assert ok.exit_code == 0, ok.output
    assert "lib/libkern.so: sm_80, compute_90" in ok.output
    too_old = CliRunner().invoke(main, ["verify", pkg, "--cuda", "13.0", "--arch", "6.0"])
    assert too_old.exit_code == 2  # CUDA 13 cannot build sm_60
    defaults = CliRunner().invoke(main, ["verify", pkg, "--cuda", "13.0", "--json"])
    assert defaults.exit_code == 1  # the default CUDA 13 list asks for far more than sm_80


def test_a_damaged_elf_file_is_reported_not_a_traceback(parts: Path, tmp_path: Path) -> None:
    def plant(root: Path) -> None:
        head = (parts / "libgreet.so").read_bytes()[:64]
        (root / "lib" / "libtrunc.so").write_bytes(head + b"\xff" * 64)  # headers point past the end

    errors = verify_package(_package(parts, tmp_path, plant)).errors
    assert errors == ["lib/libtrunc.so: damaged ELF file (headers cannot be read)"]

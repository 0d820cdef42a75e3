"""`verify` reads the CUDA archs inside static libraries (libmagma.a) and rejects a wrong-arch one.

The archives are built here with the real nvcc and GNU ar: device objects for sm_80 or sm_90,
a host-only object, and a member with a long name (GNU ar's `//` name table).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from elfkit import KERNEL_SRC, NVCC, make_package, write_metadata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from condapipe.cli.main import main
from condapipe.elf.archive import AR_MAGIC, ArchiveError, iter_members, read_archive_fatbins
from condapipe.facts.arch import parse_arch_list
from condapipe.verify.verifier import verify_package

pytestmark = pytest.mark.skipif(not Path(NVCC).exists() or not shutil.which("ar"), reason="needs nvcc and ar")

LONG = "magma_generated_dgetrf_batched_smallsq_noshfl.cu.o"  # > 15 chars: lives in the // table


def _ar(out: Path, *objects: Path) -> Path:
    out.unlink(missing_ok=True)
    subprocess.run(["ar", "rcs", str(out), *map(str, objects)], check=True)
    return out


@pytest.fixture(scope="session")
def objs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Objects compiled once: the test kernel for sm_80 and for sm_90 (fatbin compressed), host code."""
    d = tmp_path_factory.mktemp("objs")
    (d / "k.cu").write_text(KERNEL_SRC)
    for sm in ("80", "90"):
        subprocess.run(
            [NVCC, "-c", "-Xcompiler", "-fPIC", "-Xfatbin", "-compress-all",
             "-gencode", f"arch=compute_{sm},code=sm_{sm}", "-o", str(d / f"k{sm}.o"), str(d / "k.cu")],
            check=True,
        )  # fmt: skip
        shutil.copy(d / f"k{sm}.o", d / f"{sm}_{LONG}")
    (d / "host.c").write_text("int magma_host_helper(void) { return 7; }\n")
    subprocess.run(["gcc", "-c", "-fPIC", "-o", str(d / "host.o"), str(d / "host.c")], check=True)
    return d


def _package(tmp_path: Path, archive: Path, promise: str | None = None) -> Path:
    root = tmp_path / "tree"
    (root / "lib").mkdir(parents=True)
    shutil.copy(archive, root / "lib" / "libmagma.a")
    (root / "include").mkdir()
    (root / "include" / "magma_v2.h").write_text("/* header */\n")
    write_metadata(root, name="magma-cuda130", version="2.6.1")
    if promise is not None:  # what render records for the package's arch list
        about = {"extra": {"condapipe": {"cuda": "13.0", "cuda_archs": promise}}}
        (root / "info" / "about.json").write_text(json.dumps(about))
    return make_package(root, tmp_path / "magma-cuda130-2.6.1-0.conda")


def test_archs_of_each_member_object_are_read(objs: Path, tmp_path: Path) -> None:
    lib = read_archive_fatbins(_ar(tmp_path / "lib.a", objs / "host.o", objs / f"90_{LONG}", objs / "k80.o"))
    assert lib.members == 3
    assert [name for name, _ in lib.device] == [f"90_{LONG}", "k80.o"]  # long name from the // table
    assert lib.sass == {"sm_80", "sm_90"} and lib.ptx == frozenset()
    assert lib.to_dict()["objects_with_device_code"] == 2 and lib.to_dict()["compressed_entries"] == 2


def test_a_libmagma_built_for_sm80_is_rejected_against_a_promise_of_9_0(objs: Path, tmp_path: Path) -> None:
    pkg = _package(
        tmp_path, _ar(tmp_path / "lib.a", objs / "host.o", objs / "k80.o", objs / f"80_{LONG}"), "9.0"
    )
    report = verify_package(pkg)
    assert not report.ok
    assert report.archs == "9.0" and report.archs_source.startswith("recorded in the package")
    assert report.errors == [
        "lib/libmagma.a: 2 of 2 objects with device code lack CUDA archs sm_90 (e.g. k80.o has sm_80)"
    ]
    assert report.fatbins["lib/libmagma.a"]["sass"] == ["sm_80"]
    assert any("extra CUDA archs sm_80" in w for w in report.warnings)


def test_a_libmagma_built_for_sm90_is_accepted_and_its_archs_reported(objs: Path, tmp_path: Path) -> None:
    pkg = _package(
        tmp_path, _ar(tmp_path / "lib.a", objs / "host.o", objs / "k90.o", objs / f"90_{LONG}"), "9.0"
    )
    report = verify_package(pkg)
    assert report.ok, report.errors
    assert report.warnings == []
    assert report.fatbins["lib/libmagma.a"] == {
        "sass": ["sm_90"],
        "ptx": [],
        "entries": 2,
        "compressed_entries": 2,
        "objects": 3,
        "objects_with_device_code": 2,
    }


def test_one_object_lacking_the_arch_is_enough_to_reject(objs: Path, tmp_path: Path) -> None:
    pkg = _package(tmp_path, _ar(tmp_path / "lib.a", objs / "k90.o", objs / "k80.o"))
    report = verify_package(pkg, archs=parse_arch_list("9.0"))
    assert report.errors == [
        "lib/libmagma.a: 1 of 2 objects with device code lack CUDA archs sm_90 (e.g. k80.o has sm_80)"
    ]


def test_cli_prints_the_archive_archs_and_exits_1_on_a_wrong_arch(objs: Path, tmp_path: Path) -> None:
    good = _package(tmp_path / "good", _ar(tmp_path / "good.a", objs / "k90.o"))
    result = CliRunner().invoke(main, ["verify", str(good), "--arch", "9.0"])
    assert result.exit_code == 0, result.output
    assert "lib/libmagma.a: sm_90" in result.output
    bad = _package(tmp_path / "bad", _ar(tmp_path / "bad.a", objs / "k80.o"))
    result = CliRunner().invoke(main, ["verify", str(bad), "--arch", "9.0"])
    assert result.exit_code == 1
    assert "lack CUDA archs sm_90" in result.output and "Traceback" not in result.output


def test_damaged_archives_are_errors_not_crashes(objs: Path, tmp_path: Path) -> None:
    good = _ar(tmp_path / "lib.a", objs / "k90.o").read_bytes()
    header = len(AR_MAGIC)
    cases = {
        "truncated": good[: len(good) // 2],
        "size past the end": good[:header] + good[header : header + 48] + b"9999999999" + good[header + 58 :],
        "size not a number": good[:header] + good[header : header + 48] + b"12x4      " + good[header + 58 :],
        "thin": b"!<thin>\n" + good[header:],
    }
    for what, data in cases.items():
        bad = tmp_path / f"{what}.a"
        bad.write_bytes(data)
        with pytest.raises(ArchiveError):
            read_archive_fatbins(bad)
        report = verify_package(
            _package(tmp_path / what.replace(" ", "-"), bad), archs=parse_arch_list("9.0")
        )
        assert not report.ok and "unreadable static library" in report.errors[0], (what, report.errors)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_junk_after_the_magic_ends_quickly_in_archive_error_or_members(junk: bytes) -> None:
    data = AR_MAGIC + junk
    try:
        members = list(iter_members(data))
    except ArchiveError:
        return
    for m in members:  # whatever was accepted lies inside the data
        assert m.offset >= 0 and m.offset + m.size <= len(data)

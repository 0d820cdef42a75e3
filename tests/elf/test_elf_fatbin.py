"""`.nv_fatbin` parsing on libraries compiled by nvcc with chosen -gencode combinations."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from elfkit import NVCC, nvcc_shared
from hypothesis import given
from hypothesis import strategies as st

from condapipe.elf.fatbin import (
    KIND_ELF,
    FatbinError,
    cubin_problem,
    decompress,
    lz4_block_decompress,
    parse_fatbin,
    ptx_problem,
    read_fatbin,
)

pytestmark = pytest.mark.skipif(not Path(NVCC).exists(), reason="nvcc not installed")

SASS_PTX = ("arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80", "arch=compute_86,code=compute_86")
BASE = ("arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90", "arch=compute_90,code=compute_90")
SPECIFIC = (
    "arch=compute_90a,code=sm_90a",
    "arch=compute_100f,code=sm_100f",
    "arch=compute_120a,code=compute_120a",
)
COMPRESS = ("-Xfatbin", "-compress-all")


@pytest.fixture(scope="session")
def cubins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fatbin")
    return {
        "plain": nvcc_shared(d / "libplain.so", SASS_PTX),
        "base": nvcc_shared(d / "libbase.so", BASE, ("-Xfatbin", "-compress-mode=none")),
        "zstd": nvcc_shared(d / "libzstd.so", BASE, COMPRESS),
        "size": nvcc_shared(
            d / "libsize.so",
            ("arch=compute_86,code=sm_86", "arch=compute_120,code=sm_120"),
            (*COMPRESS, "-compress-mode=size"),
        ),
        "lz4": nvcc_shared(d / "liblz4.so", BASE, (*COMPRESS, "-compress-mode=speed")),
        "specific": nvcc_shared(d / "libspecific.so", SPECIFIC),
    }


def test_sass_and_ptx_archs_are_listed(cubins: dict[str, Path]) -> None:
    report = read_fatbin(cubins["plain"])
    assert report.sass == {"sm_75", "sm_80"}
    assert report.ptx == {"compute_86"}


@pytest.mark.parametrize("kind", ["zstd", "size", "lz4"])
def test_compressed_fatbins_are_parsed(cubins: dict[str, Path], kind: str) -> None:
    report = read_fatbin(cubins[kind])
    assert report.compressed == len(report.entries) > 0
    expected = {"zstd": {"sm_80", "sm_90"}, "lz4": {"sm_80", "sm_90"}, "size": {"sm_86", "sm_120"}}[kind]
    assert report.sass == expected
    codecs = {e.compression for e in report.entries if e.kind == 2}
    assert codecs == ({"lz4"} if kind == "lz4" else {"zstd"})


@pytest.mark.parametrize("kind", ["zstd", "size", "lz4"])
def test_compressed_payloads_decompress_to_the_uncompressed_build(cubins: dict[str, Path], kind: str) -> None:
    plain = read_fatbin(cubins["base"])
    packed = read_fatbin(cubins[kind]) if kind != "size" else None
    if packed is None:  # different archs: check the payloads are cubins of the stated size
        for entry in read_fatbin(cubins["size"]).entries:
            data = decompress(cubins["size"], entry)
            assert len(data) == entry.uncompressed_size
            assert data.startswith(b"\x7fELF") if entry.kind == 2 else b".target" in data
        return
    assert [e.name for e in plain.entries] == [e.name for e in packed.entries]
    for a, b in zip(plain.entries, packed.entries, strict=True):
        # PTX text is NUL-padded to 8 bytes when stored uncompressed
        assert decompress(cubins["base"], a).rstrip(b"\0") == decompress(cubins[kind], b).rstrip(b"\0")


@pytest.mark.parametrize("kind", ["base", "zstd", "lz4"])
def test_every_payload_nvcc_wrote_is_a_cubin_or_ptx_of_its_arch(cubins: dict[str, Path], kind: str) -> None:
    entries = read_fatbin(cubins[kind]).entries
    assert {e.kind for e in entries} == {1, KIND_ELF}
    for entry in entries:
        data = decompress(cubins[kind], entry)
        check = cubin_problem if entry.kind == KIND_ELF else ptx_problem
        assert check(data, entry.arch) is None, entry.name
        assert check(data, entry.arch + 1) is not None  # a payload of another arch is named as such


def test_payloads_that_are_not_what_their_header_says_are_named() -> None:
    cubin = bytearray(b"\x7fELF\x02" + bytes(59))
    struct.pack_into("<H", cubin, 18, 62)  # x86-64, not CUDA
    assert cubin_problem(bytes(cubin), 80) == "ELF machine 62 is not CUDA"
    assert cubin_problem(b"\x7fELF\x01" + bytes(59), 80) == "not a 64-bit ELF"
    struct.pack_into("<H", cubin, 18, 190)
    struct.pack_into("<I", cubin, 48, 80 << 8)
    assert cubin_problem(bytes(cubin), 80) is None
    struct.pack_into("<Q", cubin, 40, 1 << 20)  # section headers far past the end
    struct.pack_into("<H", cubin, 58, 64)
    struct.pack_into("<H", cubin, 60, 1)
    assert cubin_problem(bytes(cubin), 80) == "section headers run past the end"
    assert ptx_problem(b".version 8.0\n.target sm_80\n\0\0", 80) is None
    assert ptx_problem(b".target sm_80\0garbage", 80) == "PTX text contains NUL bytes"
    assert ptx_problem(b".target sm_90\n", 80) == "PTX has no .target sm_80"


def test_arch_specific_and_family_targets_keep_their_suffix(cubins: dict[str, Path]) -> None:
    report = read_fatbin(cubins["specific"])
    assert report.sass == {"sm_90a", "sm_100f"}
    assert report.ptx == {"compute_120a"}


def test_a_host_only_library_has_no_device_code(tmp_path: Path) -> None:
    from elfkit import LIB_SRC, gcc_shared

    assert read_fatbin(gcc_shared(tmp_path / "libhost.so", LIB_SRC)).entries == ()


def test_a_corrupted_fatbin_header_is_reported(cubins: dict[str, Path], tmp_path: Path) -> None:
    from condapipe.elf.reader import ElfFile

    broken = tmp_path / "libbroken.so"
    shutil.copy(cubins["base"], broken)
    with ElfFile(broken) as elf:
        sec = elf.section(".nv_fatbin")
    assert sec is not None
    with open(broken, "r+b") as fh:
        fh.seek(sec.offset + 16)  # first entry header: kind
        fh.write(b"\x07\x00")
    with pytest.raises(FatbinError):
        read_fatbin(broken)
    with pytest.raises(FatbinError):
        parse_fatbin(b"\x01" * 32)


def test_lz4_decoder_handles_overlapping_matches() -> None:
    # literals "ab", then a match of 10 bytes at offset 2 (overlapping): "ab" * 6, then the
    # 5 literals every LZ4 block ends with
    block = bytes([0x26]) + b"ab" + (2).to_bytes(2, "little") + bytes([0x50]) + b"cdefg"
    assert lz4_block_decompress(block, 17) == b"ab" * 6 + b"cdefg"


@pytest.mark.parametrize("claimed", [16, 1 << 40])
def test_an_lz4_block_that_does_not_fit_its_header_size_is_a_fatbin_error(claimed: int) -> None:
    # Too small for the data (a damaged header), or more than the block can expand to.
    block = bytes([0x26]) + b"ab" + (2).to_bytes(2, "little") + bytes([0x50]) + b"cdefg"
    with pytest.raises(FatbinError, match="corrupt LZ4 block"):
        lz4_block_decompress(block, claimed)


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump") or next(iter(glob.glob("/usr/local/cuda*/bin/cuobjdump")), None)
    if found:
        return found
    try:
        import nvidia

        for base in nvidia.__path__:
            for cand in glob.glob(os.path.join(base, "cu*", "bin", "cuobjdump")):
                return cand
    except ImportError:
        return None
    return None


@pytest.mark.skipif(_cuobjdump() is None, reason="cuobjdump not installed")
@pytest.mark.parametrize("kind", ["plain", "zstd", "size", "lz4", "specific"])
def test_report_matches_cuobjdump(cubins: dict[str, Path], kind: str) -> None:
    tool = _cuobjdump()
    assert tool is not None
    elf = subprocess.run(
        [tool, "--list-elf", cubins[kind]], capture_output=True, text=True, check=True
    ).stdout
    ptx = subprocess.run(
        [tool, "--list-ptx", cubins[kind]], capture_output=True, text=True, check=True
    ).stdout
    their_sass = re.findall(r"\.(sm_\d+[af]?)\.cubin", elf)
    their_ptx = re.findall(r"\.sm_(\d+[af]?)\.ptx", ptx)
    report = read_fatbin(cubins[kind])
    # cuobjdump names family cubins by their base arch (sm_100f -> sm_100)
    ours_sass = sorted(
        e.name.rstrip("f") if e.suffix == "f" else e.name for e in report.entries if e.kind == 2
    )
    assert ours_sass == sorted(their_sass)
    assert sorted(report.ptx) == sorted(f"compute_{p}" for p in their_ptx)


@given(st.binary(max_size=512), st.booleans())
def test_arbitrary_bytes_parse_or_raise_fatbin_error(body: bytes, framed: bool) -> None:
    """A damaged section never hangs the verifier or escapes as another exception."""
    data = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body if framed else body
    with contextlib.suppress(FatbinError):
        for entry in parse_fatbin(data):
            assert entry.kind in (1, 2) and entry.offset + entry.size <= len(data)


@given(st.binary(max_size=256), st.integers(min_value=0, max_value=4096))
def test_lz4_decoder_never_crashes_on_garbage(data: bytes, size: int) -> None:
    with contextlib.suppress(FatbinError):
        assert len(lz4_block_decompress(data, size)) <= size

"""`--source TARBALL` goes through condapipe's safe extraction before any engine sees it, and the engine
gets a folder: total size, member count and compression ratio are bounded, absolute or escaping links
and device nodes are refused, each with a one-line message naming the archive. `fix` and `verify`
refuse the same zero bomb, by the one ratio bound of condapipe.package.safe_extract.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from fuzz import archives

from condapipe.buildspec.settings import resolve_settings
from condapipe.cli.main import main
from condapipe.cli.source_input import unpacked_source
from condapipe.package.safe_extract import UnsafePackage, safe_extract_source
from condapipe.process_settings import process_settings, use_process_settings


class _Zeros(io.RawIOBase):
    """`size` zero bytes, read in chunks: a bomb member without holding it in memory."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self.left)
        buf[:n] = bytes(n)
        self.left -= n
        return n


def _tarball(path: Path, members: list[tuple[tarfile.TarInfo, int]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        for info, zeros in members:
            info.size = zeros if info.isreg() else 0
            tar.addfile(info, _Zeros(zeros) if info.isreg() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info


def _release(path: Path) -> Path:
    return _tarball(
        path, [(_member("magma-2.6.1", tarfile.DIRTYPE), 0), (_member("magma-2.6.1/CMakeLists.txt"), 10)]
    )


def test_a_release_tarball_becomes_its_top_folder_for_the_engine(tmp_path: Path) -> None:
    archive = _release(tmp_path / "magma-2.6.1.tar.gz")
    settings = resolve_settings("magma", {"source": str(archive)}, environ={}, config={})
    unpacked = unpacked_source(settings, tmp_path / "work")
    tree = Path(unpacked.spec["source"])
    assert tree.name == "magma-2.6.1" and tree.parent.parent == tmp_path / "work" / "sources"
    assert (tree / "CMakeLists.txt").read_bytes() == bytes(10)
    assert unpacked_source(settings, tmp_path / "work").spec["source"] == str(tree)  # unpacked once
    assert [p.name for p in (tmp_path / "work" / "sources").iterdir()] == [tree.parent.name]  # no temp left


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (
            [(_member("src/passwd", tarfile.SYMTYPE, "/etc/passwd"), 0)],
            "points to the absolute path /etc/passwd",
        ),
        ([(_member("src/up", tarfile.SYMTYPE, "../../../etc"), 0)], "points outside the package"),
        ([(_member("/abs/file"), 1)], "has an absolute path"),
        ([(_member("../escape"), 1)], "leaves the package"),
        ([(_member("src/null", tarfile.CHRTYPE), 0)], "is a character device"),
        ([(_member("src/disk", tarfile.BLKTYPE), 0)], "is a block device"),
        ([(_member("src/fifo", tarfile.FIFOTYPE), 0)], "is a FIFO"),
        ([(_member("src/hl", tarfile.LNKTYPE, "/etc/passwd"), 0)], "has an absolute path"),
    ],
)
def test_links_out_and_special_files_are_refused(tmp_path: Path, members: list, message: str) -> None:
    archive = _tarball(tmp_path / "src.tar.gz", members)
    with pytest.raises(UnsafePackage, match=message):
        safe_extract_source(archive, tmp_path / "dest")
    assert not (tmp_path / "escape").exists()


def test_a_zero_bomb_is_refused_by_its_compression_ratio_in_moments(tmp_path: Path) -> None:
    archive = _tarball(tmp_path / "bomb.tar.gz", [(_member("src/zeros"), 128 << 20)])  # 128 MiB of zeros
    assert archive.stat().st_size < 1 << 20  # ~1000:1
    start = time.monotonic()
    with pytest.raises(UnsafePackage, match=r"expands to more than \d+ bytes at member src/zeros"):
        safe_extract_source(archive, tmp_path / "dest")
    assert time.monotonic() - start < 5
    assert not (tmp_path / "dest" / "src" / "zeros").exists()  # refused from the header, before writing


def test_the_member_count_is_bounded(tmp_path: Path) -> None:
    use_process_settings(process_settings({"CONDAPIPE_MAX_UNPACK_FILES": "100"}))  # as the root command does
    archive = _tarball(tmp_path / "many.tar.xz", [(_member(f"f{i}"), 0) for i in range(101)], "w:xz")
    with pytest.raises(UnsafePackage, match="more than 100 members"):
        safe_extract_source(archive, tmp_path / "dest")


def test_a_zip_source_follows_the_same_rules(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.zip", tmp_path / "bad.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("pkg/a.txt", "a")
    safe_extract_source(good, tmp_path / "g")
    assert (tmp_path / "g" / "pkg" / "a.txt").read_text() == "a"
    with zipfile.ZipFile(bad, "w") as zf:
        info = zipfile.ZipInfo("pkg/passwd")
        info.external_attr = (0o120777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(UnsafePackage, match="absolute path /etc/passwd"):
        safe_extract_source(bad, tmp_path / "b")


def test_build_refuses_a_hostile_source_archive_with_one_line_and_leaves_no_scratch(tmp_path: Path) -> None:
    archive = _tarball(
        tmp_path / "magma.tar.gz", [(_member("magma/passwd", tarfile.SYMTYPE, "/etc/passwd"), 0)]
    )
    work = tmp_path / "work"
    result = CliRunner().invoke(
        main, ["build", "magma", "--cuda", "12.4", "--source", str(archive), "--work-dir", str(work)]
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "points to the absolute path /etc/passwd" in lines[-1]
    assert str(archive) in lines[-1]
    assert list((work / "sources").iterdir()) == []


@pytest.mark.parametrize("command", [["verify"], ["fix"]])
def test_fix_and_verify_refuse_the_same_zero_bomb(tmp_path: Path, command: list[str]) -> None:
    """100 MiB of zeros in a package of a few KiB: past the ratio bound for both commands."""
    spec = archives.KINDS["clean"](tmp_path)
    spec.payload.append(archives.Member("lib/zeros", bytes(100 << 20)))
    package = archives.write_package(spec, tmp_path / f"{archives.STEM}.conda")
    assert package.stat().st_size < 1 << 20
    before = package.read_bytes()
    os.chdir(tmp_path)
    result = CliRunner().invoke(main, [*command, str(package)])
    assert result.exit_code == {"verify": 1, "fix": 2}[command[0]], result.output  # verify: a defect
    assert "expands to more than" in result.output and "lib/zeros" in result.output
    assert package.read_bytes() == before

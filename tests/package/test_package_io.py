"""package_io: unpack and repack conda packages without losing anything, in bounded memory."""

from __future__ import annotations

import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard
from conda_package_handling import api as cph
from elfkit import make_package, sha256, write_metadata

from condapipe.errors import UsageError
from condapipe.package.io import (
    PackOptions,
    machine_memory_bound_mib,
    pack,
    read_index,
    unpack,
    update_paths_json,
    zstd_worker_mib,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tool").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "bin" / "tool", 0o755)
    (root / "share").mkdir()
    (root / "share" / "a.txt").write_text("same bytes\n")
    os.link(root / "share" / "a.txt", root / "share" / "b.txt")
    (root / "share" / "link").symlink_to("a.txt")
    (root / "share" / "secret").write_text("owner only\n")
    os.chmod(root / "share" / "secret", 0o600)
    write_metadata(root, name="demo")
    return root


@pytest.mark.parametrize("ext", [".conda", ".tar.bz2"])
def test_round_trip_keeps_modes_symlinks_and_hard_links(tree: Path, tmp_path: Path, ext: str) -> None:
    pkg = make_package(tree, tmp_path / f"demo-1.0-0{ext}")
    root = unpack(pkg, tmp_path / "unpacked")
    out = pack(root, tmp_path / "re" / f"demo-1.0-0{ext}", PackOptions(zstd_level=3))
    check = tmp_path / "check"
    cph.extract(str(out), dest_dir=str(check))  # the reference reader accepts it
    assert (check / "bin" / "tool").stat().st_mode & 0o777 == 0o755
    assert (check / "share" / "secret").stat().st_mode & 0o777 == 0o600
    assert os.readlink(check / "share" / "link") == "a.txt"
    assert (check / "share" / "a.txt").stat().st_ino == (check / "share" / "b.txt").stat().st_ino
    assert read_index(out)["name"] == "demo"
    for rel in ("bin/tool", "share/a.txt", "info/paths.json"):
        assert sha256(check / rel) == sha256(tree / rel)


def test_conda_layout_matches_conda_package_handling(tree: Path, tmp_path: Path) -> None:
    out = pack(tree, tmp_path / "demo-1.0-0.conda", PackOptions(zstd_level=3))
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        assert names == ["metadata.json", "pkg-demo-1.0-0.tar.zst", "info-demo-1.0-0.tar.zst"]
        assert json.loads(zf.read("metadata.json")) == {"conda_pkg_format_version": 2}
        raw = zstandard.ZstdDecompressor().stream_reader(zf.open("pkg-demo-1.0-0.tar.zst"))
        with tarfile.open(fileobj=raw, mode="r|") as tar:
            members = {m.name: m for m in tar}
    assert members["share/b.txt"].islnk() or members["share/a.txt"].islnk()
    assert members["share/link"].issym() and members["bin/tool"].uid == 0
    assert not any(n.startswith("info/") for n in members)


def test_paths_json_is_refreshed_for_changed_and_added_files(tree: Path) -> None:
    (tree / "bin" / "tool").write_text("#!/bin/sh\necho changed\n")
    (tree / "bin" / "new").write_text("new\n")
    update_paths_json(tree, ["bin/tool"], ["bin/new"])
    paths = {e["_path"]: e for e in json.loads((tree / "info/paths.json").read_text())["paths"]}
    assert paths["bin/tool"]["sha256"] == sha256(tree / "bin/tool")
    assert paths["bin/tool"]["size_in_bytes"] == (tree / "bin/tool").stat().st_size
    assert paths["bin/new"]["sha256"] == sha256(tree / "bin/new")
    assert "bin/new" in (tree / "info/files").read_text().split()


def test_zstd_workers_are_capped_by_memory() -> None:
    assert 100 < zstd_worker_mib(19) < 200
    assert zstd_worker_mib(19, lean=True) < zstd_worker_mib(19) / 2
    gib = 1024  # a 1 GiB bound, as a small machine's share of its memory gives
    # few cores: the level's own tables fit the 1 GiB bound on every core
    assert PackOptions(zstd_level=19, threads=4, max_memory_mib=gib).zstd_threads() == 4
    assert not PackOptions(zstd_level=19, threads=4, max_memory_mib=gib).lean_tables()
    # many cores: lean tables keep every core busy within the bound instead of idling 11 of 16
    many = PackOptions(zstd_level=19, threads=16, max_memory_mib=gib)
    assert many.lean_tables() and many.zstd_threads() == 16
    assert 16 * zstd_worker_mib(19, lean=True) + 256 <= 1024
    assert PackOptions(zstd_level=19, threads=64, max_memory_mib=gib).zstd_threads() < 64
    # no bound: the level's own tables on every core
    unbound = PackOptions(zstd_level=19, threads=16, max_memory_mib=0)
    assert unbound.zstd_threads() == 16 and not unbound.lean_tables()
    assert PackOptions(zstd_level=3, threads=16, max_memory_mib=gib).zstd_threads() == 16
    assert PackOptions(zstd_level=22, threads=16, max_memory_mib=gib).zstd_threads() < 8


def _meminfo(tmp_path: Path, available_gib: float) -> Path:
    path = tmp_path / "meminfo"
    kib = int(available_gib * 1024 * 1024)
    path.write_text(f"MemTotal:       {kib * 2} kB\nMemFree:        {kib} kB\nMemAvailable:   {kib} kB\n")
    return path


def test_the_compressor_memory_bound_comes_from_the_machine(tmp_path: Path) -> None:
    # The 64-core machine (503 GiB available): no cap leaves cores idle; standard tables on all 64.
    big = machine_memory_bound_mib(_meminfo(tmp_path, 503))
    options = PackOptions(zstd_level=19, threads=64, max_memory_mib=big)
    assert options.zstd_threads() == 64 and not options.lean_tables()
    # A 4 GiB machine: 1 GiB for the compressor, within which 16 cores still all work (lean tables).
    small = machine_memory_bound_mib(_meminfo(tmp_path, 4))
    assert small == 1024
    assert PackOptions(zstd_level=19, threads=16, max_memory_mib=small).zstd_threads() == 16
    # Nothing readable: the floor, never more than a small machine can give.
    assert machine_memory_bound_mib(tmp_path / "missing") == 512
    # The default is this machine's own share.
    assert PackOptions().max_memory_mib == machine_memory_bound_mib()


def test_lean_tables_cost_little_ratio_and_round_trip(tmp_path: Path) -> None:
    """On real shared-library bytes the lean workers' output stays within 2 % of the level's own."""
    corpus = bytearray()
    for lib in sorted(Path("/usr/lib/x86_64-linux-gnu").glob("lib*.so.*")):
        if lib.is_file() and not lib.is_symlink():
            corpus += lib.read_bytes()[: 1 << 20]
        if len(corpus) >= 6 << 20:
            break
    if len(corpus) < 1 << 20:
        pytest.skip("no shared libraries to sample")
    data = bytes(corpus)
    std = zstandard.ZstdCompressor(level=19).compress(data)
    lean_options = PackOptions(zstd_level=19, threads=16)
    lean = zstandard.ZstdCompressor(compression_params=lean_options.zstd_parameters()).compress(data)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(lean) == data
    assert len(lean) <= len(std) * 1.02


def test_failed_pack_leaves_no_partial_output(tree: Path, tmp_path: Path) -> None:
    (tree / "info" / "index.json").unlink()
    with pytest.raises(UsageError, match=r"no info/index\.json"):
        pack(tree, tmp_path / "demo-1.0-0.conda")
    assert list(tmp_path.glob("*demo*")) == []


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("demo.zip", b"PK", "not a conda package"),
        ("demo-1.0-0.conda", b"not a zip", "not a readable conda package"),
        ("demo-1.0-0.tar.bz2", b"not bz2", "not a readable conda package"),
    ],
)
def test_bad_packages_are_usage_errors(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    bad = tmp_path / name
    bad.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        read_index(bad)
    with pytest.raises(UsageError, match=message):
        unpack(bad, tmp_path / "out")


@pytest.mark.parametrize("ext", [".conda", ".tar.bz2"])
def test_progress_reports_every_byte_once(tree: Path, tmp_path: Path, ext: str) -> None:
    seen: list[tuple[int, int]] = []
    pack(
        tree,
        tmp_path / f"demo-1.0-0{ext}",
        PackOptions(zstd_level=1),
        progress=lambda n, t: seen.append((n, t)),
    )
    regular = [p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()]
    total = sum(p.stat().st_size for p in regular)
    assert {t for _n, t in seen} == {total}
    assert sum(n for n, _t in seen) == total

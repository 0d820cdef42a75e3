"""verify reads the tree fix wrote a package from, instead of unpacking the same bytes again —
only while the package still hashes to what fix recorded and the tree is exactly as fix left it.

fix (keep_tree) leaves `.<package>.tree/` and its record beside the output; the plan's verify step
reads it, then removes it. A package replaced by other bytes, or a tree with a file added, changed
or touched since, is not trusted: verify unpacks the package as it always did.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elfkit import LIB_SRC, gcc_shared, write_metadata

from condapipe.fix.fixer import FixOptions, fix_package
from condapipe.package import tree_record
from condapipe.package.io import PackOptions, pack
from condapipe.verify.verifier import verify_package

BUILD_PREFIX = "/home/ci/conda-bld/demo_1700000000/_h_env_placehold_placehold_placehold"


def _engine_package(tmp_path: Path, text: str = "data\n") -> Path:
    root = tmp_path / "tree"
    gcc_shared(root / "lib" / "libdemo.so", LIB_SRC, soname="libdemo.so", rpath=f"{BUILD_PREFIX}/lib")
    (root / "share").mkdir()
    (root / "share" / "data.txt").write_text(text * 1000)
    write_metadata(root, name="demo")
    return pack(root, tmp_path / "engine" / "demo-1.0-0.conda", PackOptions(zstd_level=1))


@pytest.fixture
def fixed(tmp_path: Path) -> Path:
    report = fix_package(
        _engine_package(tmp_path),
        FixOptions(build_prefixes=(BUILD_PREFIX,)),
        output_dir=tmp_path / "fix",
        pack_options=PackOptions(zstd_level=3),
        repack_level=True,
        keep_tree=True,
    )
    return Path(str(report.output))


def test_fix_keeps_the_tree_it_wrote_the_package_from_and_verify_reads_it(fixed: Path) -> None:
    kept = tree_record.trusted_tree(fixed)
    assert kept == tree_record.tree_path(fixed)
    assert (kept / "lib" / "libdemo.so").is_file() and (kept / "info" / "paths.json").is_file()

    from_tree = verify_package(fixed).to_dict()
    tree_record.discard(fixed)
    assert not tree_record.tree_path(fixed).exists() and not tree_record.record_path(fixed).exists()
    unpacked = verify_package(fixed).to_dict()

    assert (from_tree.pop("read_from"), unpacked.pop("read_from")) == ("kept tree", "package")
    assert from_tree == unpacked and from_tree["ok"], from_tree


def test_a_package_replaced_by_other_bytes_is_not_described_by_its_tree(fixed: Path, tmp_path: Path) -> None:
    other = fix_package(
        _engine_package(tmp_path / "other", text="other data\n"),
        FixOptions(build_prefixes=(BUILD_PREFIX,)),
        output_dir=tmp_path / "other-fix",
        pack_options=PackOptions(zstd_level=3),
        repack_level=True,
    )
    os.replace(str(other.output), fixed)

    assert tree_record.trusted_tree(fixed) is None


@pytest.mark.parametrize("change", ["edit", "touch", "add", "remove"])
def test_a_tree_changed_since_fix_is_not_trusted(fixed: Path, change: str) -> None:
    tree = tree_record.tree_path(fixed)
    data = tree / "share" / "data.txt"
    if change == "edit":
        data.write_text("tampered\n")
    elif change == "touch":
        os.utime(data, ns=(0, 0))
    elif change == "add":
        (tree / "share" / "extra.txt").write_text("not in the package\n")
    else:
        data.unlink()

    assert tree_record.trusted_tree(fixed) is None
    report = verify_package(fixed)  # the package itself is fine: verify unpacks it instead
    assert report.ok and report.read_from == "package"

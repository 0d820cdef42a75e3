"""A kept tree read for the last time is out of the way at once and gone before the plan ends.

The plan's verify step is the kept tree's last reader; removing gigabytes of files is cleanup, so
it runs beside the steps that follow (condapipe.package.tree_record.discard_soon) and the plan
runner waits for it before it returns. Nothing may trust or find the tree after the discard, and
nothing it held may be left behind, also from a run interrupted while removing.
"""

from __future__ import annotations

from pathlib import Path

from condapipe.package import tree_record


def _kept_tree(tmp_path: Path, name: str = "pkg-1.0-0.conda") -> Path:
    package = tmp_path / name
    package.write_bytes(b"not read here")
    tree = tree_record.tree_path(package)
    (tree / "lib").mkdir(parents=True)
    for i in range(50):
        (tree / "lib" / f"f{i}.so").write_bytes(b"x" * 4096)
    (tree / "lib" / "link.so").symlink_to("f0.so")
    tree_record.record_path(package).write_text("{}")
    return package


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_the_tree_and_its_record_are_gone_from_their_names_at_once_and_from_disk_after_the_wait(
    tmp_path: Path,
) -> None:
    package = _kept_tree(tmp_path)
    tree_record.discard_soon(package)
    assert not tree_record.tree_path(package).exists()  # nothing can read or trust it any more
    assert not tree_record.record_path(package).exists()
    assert tree_record.trusted_tree(package) is None
    tree_record.wait_for_removals()
    assert _leftovers(tmp_path) == []
    assert package.read_bytes() == b"not read here"  # the package itself is untouched


def test_a_tree_an_interrupted_run_left_on_its_way_out_is_removed_by_the_next_discard(tmp_path: Path) -> None:
    package = _kept_tree(tmp_path, "torch[x]-2.6.0-0.conda")  # a glob character in the name
    stale = tmp_path / f"{tree_record.tree_path(package).name}.removing-999999-0"
    (stale / "deep" / "er").mkdir(parents=True)
    (stale / "deep" / "er" / "big.bin").write_bytes(b"y" * 65536)
    other = tmp_path / ".other-1.0-0.conda.tree.removing-999999-0"  # another package's: not ours to take
    other.mkdir()
    tree_record.discard_soon(package)
    tree_record.wait_for_removals()
    assert _leftovers(tmp_path) == [other.name]


def test_a_kept_tree_that_is_a_link_is_removed_as_a_link_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    folder = tmp_path / "out"
    folder.mkdir()
    package = folder / "pkg-1.0-0.conda"
    package.write_bytes(b"")
    tree_record.tree_path(package).symlink_to(outside, target_is_directory=True)
    tree_record.discard_soon(package)
    tree_record.wait_for_removals()
    assert _leftovers(folder) == []
    assert (outside / "keep.txt").read_text() == "mine"


def test_discarding_a_package_without_a_kept_tree_starts_nothing(tmp_path: Path) -> None:
    package = tmp_path / "pkg-1.0-0.conda"
    package.write_bytes(b"")
    tree_record.discard_soon(package)
    tree_record.wait_for_removals()
    assert _leftovers(tmp_path) == []

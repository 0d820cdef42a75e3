"""A --source tree or tarball must be the project and version the build asks for.

The patches of a build are chosen for its version; on another release they would fail deep inside
the engine or, worse, apply to the wrong code. So `condapipe render|build --source X` reads the
version file the family names (pytorch: version.txt; magma: include/magma_types.h, CMakeLists.txt
or Makefile) from the tree or from inside the tarball first, and refuses a mismatch with a
one-line error (exit 2) that names the expected version and the patches that would have applied.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from e2e_helpers import condapipe

MAGMA_TYPES = """\
#ifndef MAGMA_TYPES_H
#define MAGMA_TYPES_H
#define MAGMA_VERSION_MAJOR {major}
#define MAGMA_VERSION_MINOR {minor}
#define MAGMA_VERSION_MICRO {micro}
#define MAGMA_VERSION_STAGE "svn"
#endif
"""


def pytorch_tree(root: Path, version_txt: str) -> Path:
    root.mkdir(parents=True)
    (root / "version.txt").write_text(version_txt + "\n")
    (root / "setup.py").write_text("# stand-in\n")
    return root


def magma_tree(root: Path, version: str) -> Path:
    major, minor, micro = version.split(".")
    (root / "include").mkdir(parents=True)
    (root / "include" / "magma_types.h").write_text(MAGMA_TYPES.format(major=major, minor=minor, micro=micro))
    return root


def tarball(tree: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(tree, arcname=tree.name)
    return dest


def render(tmp_path: Path, *args: str) -> tuple[int, str]:
    code, _, err = condapipe("render", *args, "-o", str(tmp_path / "out"), cwd=tmp_path)
    return code, err


PYTORCH = ("pytorch", "--version", "2.6.0", "--cuda", "cpu", "--python", "3.11")


def test_a_release_tree_of_the_requested_version_is_accepted(tmp_path: Path) -> None:
    tree = pytorch_tree(tmp_path / "pytorch", "2.6.0a0")  # what a v2.6.0 tree's version.txt says
    code, err = render(tmp_path, *PYTORCH, "--source", str(tree))
    assert code == 0, err
    assert (tmp_path / "out" / "recipe.yaml").is_file()


def test_a_tree_of_another_release_is_refused_naming_the_expected_version(tmp_path: Path) -> None:
    tree = pytorch_tree(tmp_path / "pytorch", "2.5.1")
    code, err = render(tmp_path, *PYTORCH, "--source", str(tree))
    assert code == 2
    assert err.strip() == (
        f"error: --source {tree} is pytorch 2.5.1 (version.txt), not the 2.6.0 this build asks for "
        "(fix: pass a 2.6.0 tree or tarball, or --version 2.5.1)"
    )
    assert not (tmp_path / "out").exists()


def test_a_wrong_magma_names_the_patches_that_would_have_applied(tmp_path: Path) -> None:
    tree = magma_tree(tmp_path / "magma-2.5.4", "2.5.4")
    code, err = render(tmp_path, "magma", "--cuda", "12.4", "--source", str(tree))
    assert code == 2
    assert f"--source {tree} is magma 2.5.4 (include/magma_types.h), not the 2.6.1 this build asks for" in err
    assert "the patches for 2.6.1 would not apply to it: cmakelists-static-pic.patch" in err


def test_another_project_is_refused(tmp_path: Path) -> None:
    tree = pytorch_tree(tmp_path / "pytorch", "2.6.0a0")
    code, err = render(tmp_path, "magma", "--cuda", "12.4", "--source", str(tree))
    assert code == 2
    assert "not a magma source tree (no include/magma_types.h or CMakeLists.txt or Makefile" in err


def test_a_tarball_is_read_without_unpacking_it(tmp_path: Path) -> None:
    good = tarball(magma_tree(tmp_path / "magma-2.6.1", "2.6.1"), tmp_path / "magma-2.6.1.tar.gz")
    code, err = render(tmp_path, "magma", "--cuda", "12.4", "--source", str(good))
    assert code == 0, err
    wrong = tarball(pytorch_tree(tmp_path / "pytorch-v2.5.0", "2.5.0"), tmp_path / "pytorch-v2.5.0.tar.gz")
    code, err = render(tmp_path, *PYTORCH, "--source", str(wrong))
    assert code == 2
    assert f"--source {wrong} is pytorch 2.5.0 (version.txt), not the 2.6.0" in err


def test_a_zip_archive_is_read_too(tmp_path: Path) -> None:
    archive = tmp_path / "pytorch-2.4.1.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pytorch-2.4.1/version.txt", "2.4.1\n")
    code, err = render(tmp_path, *PYTORCH, "--source", str(archive))
    assert code == 2 and "is pytorch 2.4.1 (version.txt)" in err


def test_a_corrupt_archive_is_a_one_line_error(tmp_path: Path) -> None:
    archive = tmp_path / "magma-2.6.1.tar.gz"
    archive.write_bytes(b"\x1f\x8b" + io.BytesIO(b"not gzip at all").getvalue())
    code, err = render(tmp_path, "magma", "--cuda", "12.4", "--source", str(archive))
    assert code == 2
    said = [line for line in err.strip().splitlines() if not line.startswith("chose ")]  # choices made
    assert len(said) == 1 and said[0].startswith(f"error: --source {archive}: not a readable source archive")

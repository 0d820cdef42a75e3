"""`condapipe fix` takes conda packages only (issue 38, item 8).

A .tar.bz2 is any bzip2 tarball by its name; one without `info/index.json`, or whose index.json is not
a JSON object naming a valid package, is refused with one line naming the file (exit 2), and the file
is left as it was.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from e2e_helpers import condapipe

PATHS = b'{"paths": [], "paths_version": 1}'


def _tar_bz2(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:bz2") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    ("members", "why"),
    [
        ({"lib/libx.so.txt": b"x"}, "no info/index.json"),
        ({"info/index.json": b"{not json", "info/paths.json": PATHS}, "not valid JSON"),
        ({"info/index.json": b"[1, 2]", "info/paths.json": PATHS}, "not a JSON object"),
        (
            {
                "info/index.json": json.dumps(
                    {"name": "x/../y", "version": "1", "subdir": "linux-64"}
                ).encode(),
                "info/paths.json": PATHS,
            },
            "not a conda package name",
        ),
    ],
    ids=["no-info", "bad-json", "list", "bad-name"],
)
@pytest.mark.parametrize("dry_run", [False, True], ids=["fix", "dry-run"])
def test_an_archive_that_is_not_a_conda_package_is_refused_and_left_alone(
    tmp_path: Path, members: dict[str, bytes], why: str, dry_run: bool
) -> None:
    package = _tar_bz2(tmp_path / "thing-1.0-0.tar.bz2", members)
    before = package.read_bytes()

    code, _out, err = condapipe("fix", *(["--dry-run"] if dry_run else []), str(package), cwd=tmp_path)

    assert code == 2, err
    assert why in err and "thing-1.0-0.tar.bz2" in err
    assert ".condapipe-fix-" not in err
    assert package.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [package.name]

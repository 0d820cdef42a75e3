"""The `--source` version pre-scan reads an archive under the unpack's bounds (issue 38, item 3).

Before a build, render and `build --dry-run` look inside a --source archive for the family's
version file. Skipping past a member of a compressed stream inflates it, so a 1 MB .tar.bz2 whose
first member claims 1 TiB of zeros would keep the pre-scan busy for hours; it is refused at once, by
the same bound (and the same message) as the real unpack.
"""

from __future__ import annotations

import bz2
import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
_CHUNK = 40 << 20  # zeros per bzip2 stream; the streams are concatenated (a multi-stream .bz2)


def _huge_member_tar_bz2(path: Path, member_size: int) -> None:
    """A .tar.bz2 whose first member is `member_size` zero bytes, built from repeated bzip2 streams
    (never materialised), followed by magma's version header."""
    assert member_size % _CHUNK == 0
    head = tarfile.TarInfo("magma-2.6.1/zeros.bin")
    head.size = member_size
    zeros = bz2.compress(bytes(_CHUNK), 9)
    version = b"#define MAGMA_VERSION_MAJOR 2\n#define MAGMA_VERSION_MINOR 6\n#define MAGMA_VERSION_MICRO 1\n"
    tail = io.BytesIO()
    with tarfile.open(fileobj=tail, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("magma-2.6.1/include/magma_types.h")
        info.size = len(version)
        tar.addfile(info, io.BytesIO(version))
    with path.open("wb") as out:
        out.write(bz2.compress(head.tobuf(format=tarfile.GNU_FORMAT)))
        for _ in range(member_size // _CHUNK):
            out.write(zeros)
        out.write(bz2.compress(tail.getvalue()))


@pytest.fixture(scope="module")
def terabyte_member(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("src") / "magma-2.6.1.tar.bz2"
    _huge_member_tar_bz2(path, _CHUNK * 26_215)  # ~1 TiB
    assert path.stat().st_size < 4 << 20
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "magma", "--cuda", "12.4", "-o", "out"],
        ["build", "magma", "--cuda", "12.4", "--dry-run", "--work-dir", "w"],
    ],
    ids=["render", "build-dry-run"],
)
def test_a_terabyte_member_is_refused_by_the_pre_scan_in_seconds(
    terabyte_member: Path, tmp_path: Path, argv: list[str]
) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [*CLI, *argv, "--source", str(terabyte_member)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # a loaded machine needs seconds; inflating a TiB needs hours
        env={k: v for k, v in os.environ.items() if not k.startswith("CONDAPIPE_MAX_UNPACK")},
    )
    assert done.returncode == 2, done.stderr
    assert "expands to more than" in done.stderr and "CONDAPIPE_MAX_UNPACK_RATIO" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 60
    assert not (tmp_path / "out").exists()

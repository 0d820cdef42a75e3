"""--pack-from-stage's first half: the staged fix moves the build's files out of the prefix.

Why a user cares: the engine must then find exactly no file of the build (it packs metadata
only) while every host file stays where the engine expects it; what was in the prefix before the
build script ran (rattler's CACHEDIR.TAG, a post-link script's output) is not the build's, as
rattler-build's own snapshot decides, and is left in place and named.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from condapipe.errors import UsageError
from condapipe.fix.stage_out import PAYLOAD, PREFIX_FILE, move_payload_out, requested_stage


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A host prefix as the engine hands it to the build script, then what the script added."""
    prefix = tmp_path / "bld" / "host_env_placehold"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "lib" / "libhost.so").write_bytes(b"host")
    record = {"name": "host-lib", "files": ["lib/libhost.so"]}
    (prefix / "conda-meta" / "host-lib-1.0-0.json").write_text(json.dumps(record))
    (prefix / "post-link-output.txt").write_text("a host package's post-link script wrote this\n")
    time.sleep(0.05)  # coarser than the file system's clock tick
    return prefix


def test_the_builds_files_move_and_the_prefix_is_as_before_the_script(prefix: Path, tmp_path: Path) -> None:
    script_start = time.time_ns()
    time.sleep(0.05)
    (prefix / "lib" / "torch").mkdir()
    (prefix / "lib" / "torch" / "libtorch.so").write_bytes(b"\x7fELF new")
    (prefix / "lib" / "libtorch.so").symlink_to("torch/libtorch.so")
    (prefix / "share" / "doc").mkdir(parents=True)
    (prefix / "share" / "doc" / "README").write_text("new")
    stage = tmp_path / "stage"

    moved, kept = move_payload_out(prefix, stage, script_start)

    assert moved == 3 and kept == ["post-link-output.txt"]
    payload = stage / PAYLOAD
    assert (payload / "lib" / "torch" / "libtorch.so").read_bytes() == b"\x7fELF new"
    assert os.readlink(payload / "lib" / "libtorch.so") == "torch/libtorch.so"
    assert (payload / "share" / "doc" / "README").read_text() == "new"
    left = sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*"))
    assert left == [
        "conda-meta",
        "conda-meta/host-lib-1.0-0.json",
        "lib",
        "lib/libhost.so",
        "post-link-output.txt",
    ]
    assert (stage / PREFIX_FILE).read_text() == str(prefix)


def test_a_second_payload_is_refused(prefix: Path, tmp_path: Path) -> None:
    (tmp_path / "stage" / PAYLOAD).mkdir(parents=True)
    with pytest.raises(UsageError, match="already holds a payload"):
        move_payload_out(prefix, tmp_path / "stage", time.time_ns())


def test_the_stage_is_found_only_where_the_engine_adapter_asked_for_it(prefix: Path, tmp_path: Path) -> None:
    assert requested_stage(prefix) is None
    (tmp_path / "condapipe-stage").mkdir()
    assert requested_stage(prefix) is None  # the folder alone is no request
    (tmp_path / "condapipe-stage" / "requested").touch()
    assert requested_stage(prefix) == (tmp_path / "condapipe-stage").resolve()


def test_the_installers_cache_tag_stays_and_an_ambiguous_file_is_refused(
    prefix: Path, tmp_path: Path
) -> None:
    # the engine installs the host and writes its build script in one clock tick of the file system
    tag = prefix / "CACHEDIR.TAG"
    tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n# created by rattler\n")
    same_tick = tag.stat().st_ctime_ns
    assert move_payload_out(prefix, tmp_path / "one", same_tick)[1] == [
        "CACHEDIR.TAG",
        "post-link-output.txt",
    ]

    other = prefix / "share" / "made-then.txt"
    other.parent.mkdir()
    other.write_text("x")
    os.utime(other)  # its ctime is now
    with pytest.raises(UsageError, match="cannot tell whether it was there before the script"):
        move_payload_out(prefix, tmp_path / "two", other.stat().st_ctime_ns)

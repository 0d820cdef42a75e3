"""scripts/fatbin_compare.py: condapipe's fatbin report agrees with NVIDIA's cuobjdump.

`condapipe verify --arch` rejects packages on the strength of this parser, so it is checked
against the vendor tool on real nvcc output: arch-specific and family targets, PTX, every
compression mode and every place a fatbin lives (objects, relocatable device code, libraries,
executables). cuobjdump needs no GPU (the `nvidia-cuda-cuobjdump` wheel is a test dependency).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fatbin_compare.py"


def _cuobjdump() -> str | None:
    spec = importlib.util.spec_from_file_location("fatbin_compare", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fatbin_compare"] = module
    spec.loader.exec_module(module)
    try:
        return module.find_cuobjdump()
    except module.ToolMissing:
        return None


needs_tools = pytest.mark.skipif(
    _cuobjdump() is None or shutil.which("nvcc") is None, reason="needs nvcc and cuobjdump"
)


def compare(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, check=False
    )


@needs_tools
@pytest.mark.parametrize(
    ("words", "cells"),
    [
        # every output kind, LZ4-compressed, with sm_90a / sm_100f SASS and family/specific PTX
        (("specific-family", "lz4-speed"), 4),
        # relocatable device code (__nv_relfatbin) with SASS + PTX, in every compression mode
        (("sm80-ptx", "rdc-object"), 5),
    ],
)
def test_condapipe_and_cuobjdump_list_the_same_code_objects(
    tmp_path: Path, words: tuple[str, ...], cells: int
) -> None:
    only = [x for w in words for x in ("--only", w)]
    proc = compare("--nvcc-matrix", *only, "--work", tmp_path, "--json-out", tmp_path / "r.json", "-j", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    summary = result["summary"]
    assert summary["binaries"] == summary["equal"] == summary["with_device_code"] == cells
    assert summary["compressed_entries"] > 0  # both readers saw the compressed entries as such
    for row in result["comparisons"]:
        assert row["ours_sass"] == row["theirs_sass"] and row["ours_ptx"] == row["theirs_ptx"]
    if "specific-family" in words:
        row = result["comparisons"][0]
        assert set(row["ours_sass"]) == {"sm_90a", "sm_100f"}
        assert set(row["ours_ptx"]) == {"sm_100f", "sm_120a"}
        # cuobjdump --list-elf calls the sm_100f cubin "sm_100"; its entry header says sm_100f
        assert summary["normalised_family_names"] > 0
    else:
        assert all(r["ours_ptx"] == ["sm_80"] for r in result["comparisons"])
    assert "binaries equal" in proc.stdout.splitlines()[-1]


@needs_tools
def test_a_file_without_device_code_is_compared_as_empty(tmp_path: Path) -> None:
    proc = compare("--file", sys.executable, "--json-out", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads((tmp_path / "r.json").read_text())["comparisons"]
    assert row["equal"] and row["ours_sass"] == row["theirs_sass"] == []


def test_nothing_to_compare_or_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = compare()
    assert (proc.returncode, proc.stderr.strip()) == (
        2,
        "error: nothing to compare: give --package, --file or --nvcc-matrix",
    )
    proc = compare("--file", tmp_path / "missing.so")
    assert proc.returncode == 2 and proc.stderr.strip().endswith("missing.so: no such file")


def test_an_unusable_cuobjdump_is_an_environment_problem(tmp_path: Path) -> None:
    proc = compare("--file", sys.executable, "--cuobjdump", tmp_path / "cuobjdump")
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"error: cuobjdump {tmp_path / 'cuobjdump'} is not an executable file"

"""Every variable the rendered pytorch / libtorch build.sh exports has a known reader.

A knob nobody reads does nothing, silently: build.sh once exported CUDNN_LIBRARY_PATH for the
pip cuDNN wheel, a name no PyTorch 1.8-2.x reads, and "CUDA builds with cuDNN" shipped without
cuDNN. pytorch.yaml's build_env names, per variable, who reads it and where (the upstream file,
or the tool's docs). This test renders the recipes of every series (CPU and CUDA), the Jetson
builds and libtorch, and checks that the exported names and build_env are the same set.
`pytest -m upstream` (test_pytorch_upstream_env.py) checks the wheel evidence itself.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from render_helpers import run_cli

from condapipe.facts import tables

EXPORT = re.compile(r"^\s*export ([A-Za-z_][A-Za-z0-9_]*)\b", re.MULTILINE)


def _series_cases() -> list[tuple[str, ...]]:
    cases = []
    for version in tables.pytorch_versions():
        info = tables.pytorch_info(version)
        if version != info.versions[-1]:
            continue
        py = info.pythons[-1]
        cases.append(("pytorch", "--version", version, "--cuda", f"{info.cudas[-1]},cpu", "--python", py))
    return cases


CASES = [
    *_series_cases(),
    ("pytorch", "--jetson", "tx2"),
    ("pytorch", "--jetson", "orin"),
    ("libtorch", "--version", "2.4.1", "--cuda", "12.4,cpu"),
    ("libtorch", "--jetson", "orin"),
]


@cache
def exported(case: tuple[str, ...], out: str) -> frozenset[str]:
    result = run_cli("render", *case, "-o", out)
    assert result.exit_code == 0, result.output
    return frozenset(EXPORT.findall((Path(out) / "build.sh").read_text()))


@pytest.fixture(scope="module")
def all_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], frozenset[str]]:
    root = tmp_path_factory.mktemp("renders")
    return {case: exported(case, str(root / str(i))) for i, case in enumerate(CASES)}


def test_every_exported_variable_has_a_reader_with_evidence(all_exports) -> None:
    evidence = tables.build_env_evidence()
    unknown = {name: " ".join(case) for case, names in all_exports.items() for name in names - set(evidence)}
    assert not unknown, f"exported but not in pytorch.yaml build_env (who reads them?): {unknown}"


def test_build_env_lists_no_variable_that_build_sh_no_longer_exports(all_exports) -> None:
    used = set().union(*all_exports.values())
    assert set(tables.build_env_evidence()) - used == set()


def test_cudnn_library_path_is_not_exported_since_no_pytorch_reads_it(all_exports) -> None:
    assert all("CUDNN_LIBRARY_PATH" not in names for names in all_exports.values())
    assert "CUDNN_LIBRARY_PATH" not in tables.build_env_evidence()


def test_wheel_evidence_names_a_file_the_upstream_test_can_check() -> None:
    for entry in tables.build_env_evidence().values():
        if entry.reader == "wheel-cmake":
            assert ".cmake" in entry.source, entry
        if entry.reader == "wheel-python":
            assert "torch/utils/" in entry.source, entry
        if entry.since is not None:
            assert entry.since in {i.series for i in map(tables.pytorch_info, tables.pytorch_versions())}

"""A package carries the CUDA archs it promises (info/about.json `extra.condapipe`, written by render);
`condapipe verify PKG` without --arch and the verify before `condapipe upload` check that promise,
and `verify --cuda X.Y` supplies the default list of the package's own family.

The CUDA library is compiled by the real nvcc for "8.0;9.0+PTX" (sm_80, sm_90 SASS + compute_90 PTX).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from elfkit import NVCC, make_package, nvcc_shared, write_metadata
from fake_anaconda.harness import isolated_env, run_cli

from condapipe.cli.main import main
from condapipe.verify.verifier import verify_package

pytestmark = pytest.mark.skipif(not Path(NVCC).exists(), reason="nvcc not installed")

HAS = "8.0;9.0+PTX"  # what the library holds


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kern") / "libkern.so"
    return nvcc_shared(
        out,
        ("arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90", "arch=compute_90,code=compute_90"),
        ("-Xfatbin", "-compress-all", "-Xlinker", "-rpath=$ORIGIN"),
    )


def package(kernel: Path, where: Path, *, name: str = "demo", record: dict | None = None) -> Path:
    """A package holding the kernel library; `record` is its about.json `extra.condapipe`."""
    root = where / f"{name}-tree"
    (root / "lib").mkdir(parents=True)
    shutil.copy(kernel, root / "lib" / "libkern.so")
    write_metadata(root, name=name)
    about = {"summary": "demo"}
    if record is not None:
        about["extra"] = {"condapipe": record}
    (root / "info" / "about.json").write_text(json.dumps(about))
    return make_package(root, where / f"{name}-1.0-0.conda")


def test_a_package_is_checked_against_the_archs_it_records(kernel: Path, tmp_path: Path) -> None:
    report = verify_package(package(kernel, tmp_path, record={"cuda": "13.0", "cuda_archs": HAS}))
    assert report.ok, report.errors
    assert (report.archs, report.archs_source) == (HAS, "recorded in the package (CUDA 13.0)")


def test_a_package_whose_recorded_archs_are_not_in_the_binary_is_rejected(
    kernel: Path, tmp_path: Path
) -> None:
    pkg = package(kernel, tmp_path, record={"cuda": "13.0", "cuda_archs": "8.0;8.6;9.0+PTX"})
    report = verify_package(pkg)
    assert report.errors == ["lib/libkern.so: missing CUDA archs sm_86 (has sm_80, sm_90, compute_90)"]
    result = CliRunner().invoke(main, ["verify", str(pkg)])
    assert result.exit_code == 1
    assert "CUDA archs checked: 8.0;8.6;9.0+PTX (recorded in the package (CUDA 13.0))" in result.stdout


def test_an_explicit_arch_list_overrides_the_record(kernel: Path, tmp_path: Path) -> None:
    pkg = package(kernel, tmp_path, record={"cuda": "13.0", "cuda_archs": "8.0;8.6"})
    result = CliRunner().invoke(main, ["verify", str(pkg), "--arch", "8.0", "--json"])
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)
    assert (report["archs"], report["archs_source"]) == ("8.0", "given")


def test_without_a_record_or_a_cuda_no_arch_is_demanded(kernel: Path, tmp_path: Path) -> None:
    report = verify_package(package(kernel, tmp_path))
    assert report.ok and report.archs is None
    assert "lib/libkern.so" in report.fatbins  # the archs are still reported


def test_an_unreadable_record_is_a_defect_and_never_runs_nvidia_smi(kernel: Path, tmp_path: Path) -> None:
    for text in ("native", "Hopper", "8.0;banana"):
        report = verify_package(package(kernel, tmp_path / text, record={"cuda": "13.0", "cuda_archs": text}))
        assert len(report.errors) == 1 and "records an unreadable arch list" in report.errors[0]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("magma-cuda130", "8.0;8.6;9.0;10.0;12.0"),  # magma's list: SASS only, no 7.5
        ("pytorch", "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"),  # pytorch's list
        ("unrelated", "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"),  # no family: the default rules (torch)
    ],
)
def test_verify_cuda_uses_the_default_list_of_the_packages_family(
    kernel: Path, tmp_path: Path, name: str, expected: str
) -> None:
    pkg = package(kernel, tmp_path, name=name)
    result = CliRunner().invoke(main, ["verify", str(pkg), "--cuda", "13.0", "--json"])
    assert result.exit_code == 1  # the library holds only 8.0;9.0+PTX
    (report,) = json.loads(result.stdout)
    assert report["archs"] == expected
    assert report["archs_source"].startswith("CUDA 13.0 default")


def test_a_record_of_another_cuda_than_verify_cuda_is_a_defect(kernel: Path, tmp_path: Path) -> None:
    pkg = package(kernel, tmp_path, record={"cuda": "12.8", "cuda_archs": HAS})
    report = verify_package(pkg, cuda="13.0")
    assert report.errors == ["the package records CUDA 12.8, not 13.0"]
    assert verify_package(pkg, cuda="cu128").ok  # any spelling of the same CUDA


def test_upload_verifies_the_recorded_archs_before_anything_is_published(
    kernel: Path, tmp_path: Path
) -> None:
    good = package(kernel, tmp_path / "good", name="good", record={"cuda": "13.0", "cuda_archs": HAS})
    bad = package(kernel, tmp_path / "bad", name="bad", record={"cuda": "13.0", "cuda_archs": "8.0;8.6"})
    channel = tmp_path / "channel"
    res = run_cli(
        ["upload", "--to", str(channel), "--json", str(good), str(bad)], isolated_env(tmp_path), tmp_path
    )
    assert res.exit_code == 1, res.stderr
    status = {f["basename"]: f["status"] for f in res.json["files"]}
    assert status == {"linux-64/good-1.0-0.conda": "uploaded", "linux-64/bad-1.0-0.conda": "blocked"}
    assert (channel / "linux-64" / "good-1.0-0.conda").is_file()
    assert not (channel / "linux-64" / "bad-1.0-0.conda").exists()

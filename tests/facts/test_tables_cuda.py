"""The per-CUDA table: complete, self-consistent, and (for the installed CUDA) equal to what the
real nvcc reports and compiles."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from condapipe.errors import UsageError
from condapipe.facts.arch import (
    Arch,
    ArchList,
    accepted_archs,
    cuda_accepts,
    magma_default_archs,
    torch_default_archs,
)
from condapipe.facts.tables import cuda_info, cuda_versions, link_overflow_max_images, normalize_cuda

EXPECTED_VERSIONS = [
    *("9.2", "10.0", "10.1", "10.2"),
    *(f"11.{n}" for n in range(9)),
    *("12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9"),  # there is no 12.7
    *("13.0", "13.1", "13.2"),
]


def test_every_released_cuda_from_9_2_to_13_2_has_a_row():
    assert list(cuda_versions()) == EXPECTED_VERSIONS


@pytest.mark.parametrize("version", EXPECTED_VERSIONS)
def test_each_row_is_consistent(version):
    info = cuda_info(version)
    default = torch_default_archs(info.version)  # raises if the default list is not compilable by this CUDA
    assert default.torch_arch_list() == info.torch_arch_list, "store the list in canonical order"
    assert len(default.ptx()) <= 1, "upstream adds PTX for one arch only"
    magma = magma_default_archs(info.version)
    assert all(cuda_accepts(info.version, a) for a in magma), "magma archs must be compilable"
    assert list(info.magma_archs) == sorted(set(info.magma_archs))
    assert info.nvcc_flags[:2] == ("-Xfatbin", "-compress-all")
    assert ("-compress-mode=size" in info.nvcc_flags) == version.startswith("13.")
    assert info.magma.package == f"magma-cuda{version.replace('.', '')}"
    assert info.run_constraint.package in ("cudatoolkit", "pytorch-cuda", "cuda-version")
    assert info.run_constraint.spec.startswith(f">={version},<")
    assert info.magma.url.endswith(f"magma-{info.magma.version}.tar.gz")
    assert re.fullmatch(r"\d+\.\d+\.\d+", info.cudnn)
    assert 6 <= info.max_gcc <= 20
    assert cuda_accepts(info.version, Arch(*map(int, info.min_arch.split("."))))
    assert cuda_accepts(info.version, Arch(*map(int, info.max_arch.split("."))))


def test_facts_from_the_reference_tables():
    assert cuda_info("11.0").run_constraint.spec == ">=11.0,<11.0.221"  # pytorch#51080
    assert str(cuda_info("11.0").run_constraint) == "cudatoolkit >=11.0,<11.0.221"
    assert str(cuda_info("11.8").run_constraint) == "pytorch-cuda >=11.8,<11.9"
    assert cuda_info("11.0").magma.version == "2.5.2"
    assert cuda_info("11.0").magma.build_number == 1
    assert cuda_info("11.8").magma_archs == (37, 50, 60, 70, 80, 86, 90)
    assert cuda_info("12.8").magma_archs == (50, 60, 70, 80, 86, 90, 100, 120)
    assert cuda_info("13.0").magma_archs == (80, 86, 90, 100, 120)
    assert cuda_info("11.0").cudnn == "8.0.5"
    assert cuda_info("11.8").cudnn == "8.7.0"
    assert cuda_info("12.4").torch_arch_list == "5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"
    assert not cuda_info("10.2").build_split_cuda and cuda_info("11.1").build_split_cuda


def test_monotonic_toolchain_facts():
    rows = [cuda_info(v) for v in EXPECTED_VERSIONS]
    gccs = [r.max_gcc for r in rows]
    assert gccs == sorted(gccs), "newer nvcc never accepts an older gcc only"
    mins = [Version(r.min_arch) for r in rows]
    assert mins == sorted(mins)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("11.8", "11.8"),
        ("cu118", "11.8"),
        ("cuda11.8", "11.8"),
        ("118", "11.8"),
        ("92", "9.2"),
        ("11.8.0", "11.8"),
        ("CPU", "cpu"),
        ("12.6.3", "12.6"),
    ],
)
def test_cuda_spellings_of_builder_and_users(text, expected):
    assert normalize_cuda(text) == expected


@pytest.mark.parametrize("text", ["12.7", "11.9", "14.0", "cuda", "eleven", "1.1.1.1", ""])
def test_unknown_cuda_is_a_one_line_error_listing_the_valid_versions(text):
    with pytest.raises(UsageError) as err:
        cuda_info(text)
    msg = str(err.value)
    assert "\n" not in msg and "valid: cpu 9.2 10.0" in msg and msg.endswith("13.2")


def test_link_overflow_threshold_is_above_every_default_list():
    assert all(torch_default_archs(v).images <= link_overflow_max_images() for v in EXPECTED_VERSIONS)


# --------------------------------------------------------------- against the real nvcc

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed")


def _installed_cuda() -> str:
    out = subprocess.run([NVCC, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    assert m, out
    return m.group(1)


def _codes(flag: str) -> set[str]:
    out = subprocess.run([NVCC, flag], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@needs_nvcc
def test_table_row_of_the_installed_cuda_matches_nvcc_list_gpu_code():
    info = cuda_info(_installed_cuda())
    plain = {a.sm for a in accepted_archs(info.version) if not a.suffix}
    assert plain == _codes("--list-gpu-code")
    assert {a.compute for a in accepted_archs(info.version) if not a.suffix} == _codes("--list-gpu-arch")


@needs_nvcc
def test_suffixed_archs_of_the_installed_cuda_are_exactly_those_nvcc_allows():
    info = cuda_info(_installed_cuda())
    help_text = subprocess.run([NVCC, "--help"], capture_output=True, text=True, check=True).stdout
    allowed = set(re.findall(r"'(sm_\d+[af])'", help_text))
    assert {a.sm for a in accepted_archs(info.version) if a.suffix} == allowed


@needs_nvcc
def test_max_gcc_of_the_installed_cuda_matches_host_config_h():
    info = cuda_info(_installed_cuda())
    dry = subprocess.run([NVCC, "--dryrun", "-c", "x.cu"], capture_output=True, text=True).stderr
    top = re.search(r"^#\$ TOP=(.+)$", dry, re.MULTILINE)
    assert top, dry
    header = Path(top.group(1).strip()) / "include" / "crt" / "host_config.h"
    m = re.search(r"#if __GNUC__ > (\d+)", header.read_text())
    assert m and int(m.group(1)) == info.max_gcc


@needs_nvcc
def test_nvcc_compiles_with_the_table_flags_and_accepts_the_default_list(tmp_path):
    info = cuda_info(_installed_cuda())
    default = [f for g in torch_default_archs(info.version).gencode_flags() for f in g.split()]
    dry = subprocess.run([NVCC, "--dryrun", "-c", "k.cu", *default, *info.nvcc_flags], capture_output=True)
    assert dry.returncode == 0, dry.stderr
    # one real compile (newest default arch, with PTX) proves the fatbin flags work end to end
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n")
    newest = ArchList((torch_default_archs(info.version).archs[-1],))
    flags = [f for g in newest.gencode_flags() for f in g.split()]
    cmd = [NVCC, "-c", str(src), "-o", str(tmp_path / "k.o"), *flags, *info.nvcc_flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@needs_nvcc
def test_nvcc_accepts_every_arch_the_table_says_it_compiles():
    info = cuda_info(_installed_cuda())
    # plain X and Xf emit the same SASS and cannot share one compile: check "f" separately
    for group in (
        [a for a in accepted_archs(info.version) if a.suffix != "f"],
        [a for a in accepted_archs(info.version) if a.suffix == "f"],
    ):
        flags = [f for g in ArchList(tuple(group)).gencode_flags() for f in g.split()]
        # --dryrun runs nvcc's own option validation (the fast part) without compiling 20 archs
        proc = subprocess.run([NVCC, "--dryrun", "-c", "k.cu", *flags], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


@needs_nvcc
def test_nvcc_rejects_an_arch_the_table_says_it_cannot_compile():
    info = cuda_info(_installed_cuda())
    too_old = Arch(7, 0)
    assert not cuda_accepts(info.version, too_old)
    flags = ArchList((too_old,)).gencode_flags()[0].split()
    proc = subprocess.run([NVCC, "--dryrun", "-c", "k.cu", *flags], capture_output=True, text=True)
    assert proc.returncode != 0

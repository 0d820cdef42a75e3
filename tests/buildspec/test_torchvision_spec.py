"""A torchvision spec: the release names the PyTorch release it is built against, and that
release's rules (Pythons, cuDNN, arch defaults, what compiles) apply to it."""

from __future__ import annotations

import pytest
from packaging.version import Version

from condapipe.buildspec.build_spec import build_spec
from condapipe.errors import UsageError
from condapipe.facts import tables


def test_every_torchvision_release_pairs_with_a_known_pytorch_release_of_its_series() -> None:
    for version in tables.torchvision_versions():
        info = tables.torchvision_info(version)
        torch = tables.pytorch_info(info.torch)  # a known release
        # Upstream's numbering since 2.0: torchvision 0.(m+15) pairs with torch 2.m (1.13 <-> 0.14).
        major, minor = (int(x) for x in torch.series.split("."))
        expected = minor + 15 if major == 2 else minor + 1
        assert info.series == f"0.{expected}", (version, info.torch)


def test_the_pairs_the_issue_names_are_the_official_ones() -> None:
    assert tables.torchvision_info("0.19.1").torch == "2.4.1"
    assert tables.torchvision_info("0.21.0").torch == "2.6.0"
    assert tables.torchvision_info("0.14.1").torch == "1.13.1"
    assert tables.torchvision_info("0.26.0").torch == "2.11.0"
    assert tables.torchvision_for_torch("2.0.0").version == "0.15.1"  # 0.15.0 was never released


def test_webp_is_read_from_0_20_on() -> None:
    assert next(v for v in tables.torchvision_versions() if tables.torchvision_info(v).webp) == "0.20.0"


def test_an_unpaired_pytorch_release_is_refused_with_the_paired_ones() -> None:
    with pytest.raises(
        UsageError,
        match=r"no torchvision release pairs with pytorch 1\.8\.0 \(torchvision\.yaml pairs 1\.13\.0 … "
        r"2\.11\.0\); the nearest that does: --version 1\.13\.0",
    ):
        tables.torchvision_for_torch("1.8.0")
    with pytest.raises(UsageError, match=r"the nearest that does: --version 2\.11\.0$"):
        tables.torchvision_for_torch("2.15.0")


def test_unknown_or_missing_torchvision_version_lists_the_valid_ones() -> None:
    with pytest.raises(
        UsageError, match=r"unknown torchvision version '0\.99\.0'; valid: 0\.14\.0 .* 0\.26\.0"
    ):
        build_spec("torchvision", {"version": "0.99.0", "cuda": ["cpu"], "python": ["3.11"]})
    with pytest.raises(UsageError, match=r"torchvision needs --version; valid: 0\.14\.0"):
        build_spec("torchvision", {"cuda": ["cpu"], "python": ["3.11"]})


def test_pythons_are_those_of_the_paired_pytorch_release() -> None:
    spec = build_spec(
        "torchvision", {"version": "0.19.1", "cuda": ["12.8"], "python": ["3.8"], "arch": "12.0"}
    )
    assert spec.pythons == ("3.8",)
    with pytest.raises(
        UsageError,
        match=r"torchvision 0\.21\.0 \(built against pytorch 2\.6\.0\) does not support Python 3\.8",
    ):
        build_spec("torchvision", {"version": "0.21.0", "cuda": ["cpu"], "python": ["3.8"]})


def test_cuda_variants_equal_those_of_the_pytorch_build_with_the_same_flags() -> None:
    flags = {"cuda": ["12.8", "11.8"], "python": ["3.10"]}
    vision = build_spec("torchvision", {**flags, "version": "0.19.1"})
    torch = build_spec("pytorch", {**flags, "version": "2.4.1"})
    for mine, theirs in zip(vision.cuda_variants, torch.cuda_variants, strict=True):
        assert (mine.cuda, mine.archs, mine.cudnn) == (theirs.cuda, theirs.archs, theirs.cudnn)
    assert Version(vision.version) == Version("0.19.1")
    assert vision.extra_env == ()  # pytorch's own build env (_GLIBCXX_USE_CXX11_ABI) is not torchvision's


def test_a_pair_whose_pytorch_cannot_compile_with_the_cuda_is_refused_naming_pytorch() -> None:
    with pytest.raises(UsageError, match=r"pytorch 2\.6\.0 cannot be compiled with CUDA 13\.0"):
        build_spec("torchvision", {"version": "0.21.0", "cuda": ["13.0"], "python": ["3.11"]})

"""A family's `version:` kind, read once from its profile, answers what each stage asks of it:
the version built, the PyTorch release whose rules apply, a companion's version, the CUDA
table's package and build number. These are the installed profiles' kinds on the real tables."""

from __future__ import annotations

import pytest

from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.families import family_rules
from condapipe.facts.versioning import versioning_of


def test_each_installed_family_reads_its_kind_once_from_its_profile() -> None:
    kinds = {
        f: family_rules(f).version.kind for f in ("pytorch", "libtorch", "torchvision", "magma", "cuda-smoke")
    }
    assert kinds == {
        "pytorch": "pytorch",
        "libtorch": "pytorch",
        "torchvision": "torchvision",
        "magma": "magma",
        "cuda-smoke": "fixed",
    }


def test_a_torchvision_release_takes_the_rules_of_the_pytorch_release_it_pairs_with() -> None:
    versioning = family_rules("torchvision").version
    version, torch = versioning.resolve("torchvision", "0.24.1", ["12.8"], [])
    assert (version, versioning.torch_of(version)) == ("0.24.1", "2.9.1")
    assert torch == tables.pytorch_info("2.9.1")
    assert versioning.companion_version("2.9.1") == "0.24.1"  # `build pytorch --with torchvision`
    assert (
        versioning.describe("torchvision", version, torch)
        == "torchvision 0.24.1 (built against pytorch 2.9.1)"
    )


def test_a_pytorch_release_is_its_own_torch_and_needs_a_version() -> None:
    versioning = family_rules("pytorch").version
    assert versioning.torch_release and versioning.torch_of("2.9.1") == "2.9.1"
    with pytest.raises(UsageError, match=r"^pytorch needs --version; valid: .*2\.9\.1"):
        versioning.resolve("pytorch", None, ["12.8"], [])


def test_a_table_versioned_family_builds_the_tables_package_and_build_number_per_cuda() -> None:
    versioning = family_rules("magma").version
    assert versioning.resolve("magma", None, ["11.8", "13.0"], []) == ("2.6.1", None)
    assert versioning.table_package("11.8") == tables.cuda_info("11.8").magma
    assert versioning.table_package(tables.CPU) is None
    assert versioning.default_build_number("2.6.1", ["11.8", "13.0"]) == 1
    assert versioning.default_build_number("2.7.0", ["11.8"]) == 0  # a version the table does not name
    warnings: list[str] = []
    assert versioning.resolve("magma", "2.7.0", ["11.8"], warnings) == ("2.7.0", None)
    assert warnings == ["magma 2.7.0 requested; the table has another magma version for CUDA 11.8 (2.6.1)"]


def test_other_kinds_have_no_table_package_and_build_number_zero() -> None:
    for family in ("pytorch", "torchvision", "cuda-smoke"):
        versioning = family_rules(family).version
        assert versioning.table_package("12.8") is None
        assert versioning.default_build_number("1.0.0", ["12.8"]) == 0


def test_a_fixed_version_is_the_default_and_required_needs_one() -> None:
    fixed = versioning_of("1.0.0", "here")
    assert fixed.resolve("cuda-smoke", None, ["13.0"], []) == ("1.0.0", None)
    assert fixed.resolve("cuda-smoke", "1.2", ["13.0"], []) == ("1.2", None)
    with pytest.raises(UsageError, match=r"^hello needs --version$"):
        versioning_of("required", "here").resolve("hello", None, ["13.0"], [])


def test_an_unknown_kind_is_one_line_naming_where_and_the_kinds() -> None:
    with pytest.raises(UsageError) as caught:
        versioning_of("semver", "recipes/x/family.yaml: spec version")
    assert str(caught.value) == (
        "recipes/x/family.yaml: spec version: 'semver' is neither a version kind "
        "(required pytorch torchvision magma) nor a version like 1.0.0"
    )

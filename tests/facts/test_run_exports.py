"""What a package built against a pinned host package requires at run time (its run_exports)."""

from __future__ import annotations

import pytest

from condapipe.facts.run_exports import run_spec


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        ("2.0.*", "numpy >=1.19,<3.0a0"),  # numpy 2.0 targets the 1.19 C API by default
        ("2.0.1", "numpy >=1.19,<3.0a0"),
        ("2.1.*", "numpy >=1.21,<3.0a0"),
        ("2.3.*", "numpy >=1.23,<3.0a0"),
        (">=2.3", "numpy >=1.23"),  # an open pin: the numpy built against is not known when rendering
        ("1.21.5", "numpy >=1.21.5,<2.0a0"),  # numpy 1.x: the version built against, never numpy 2
        ("1.19.*", "numpy >=1.19,<2.0a0"),
    ],
)
def test_a_numpy_build_runs_on_the_numpy_its_abi_allows(pin: str, expected: str) -> None:
    assert run_spec("numpy", pin) == expected


@pytest.mark.parametrize(
    ("pin", "expected"),
    [("2023.1", "mkl >=2023.1,<2024.0a0"), ("2020.2", "mkl >=2020.2,<2021.0a0"), (">=2019", "mkl >=2019")],
)
def test_an_mkl_build_needs_the_mkl_release_line_it_linked(pin: str, expected: str) -> None:
    assert run_spec("mkl", pin) == expected


def test_an_unpinned_host_package_exports_the_bare_name() -> None:
    assert run_spec("numpy", "") == "numpy"

"""The per-PyTorch-series table: every known release resolves, pins exist for every supported
Python, and unknown versions are refused with the valid choices."""

from __future__ import annotations

import pytest
from packaging.version import Version

from condapipe.errors import UsageError
from condapipe.facts.tables import cuda_versions, pytorch_info, pytorch_versions

SERIES = sorted({pytorch_info(v).series for v in pytorch_versions()}, key=Version)


def test_releases_from_1_8_to_current_2_x_are_known_in_order():
    versions = pytorch_versions()
    assert versions[0] == "1.8.0"
    assert {"1.8.0", "1.8.1", "1.13.0", "2.4.1", "2.9.0", "2.9.1"} <= set(versions)
    assert list(versions) == sorted(versions, key=Version)
    assert len(versions) == len(set(versions))


@pytest.mark.parametrize("series", SERIES)
def test_each_series_is_complete(series):
    info = pytorch_info(f"{series}.0")
    assert all(v.startswith(series + ".") for v in info.versions)
    assert info.pythons == tuple(sorted(info.pythons, key=Version))
    for python in info.pythons:
        pins = info.host_pins(python)
        assert set(pins) == {"numpy", "mkl", "setuptools", "typing_extensions"}
        assert pins["numpy"], "numpy is always pinned in host (ABI of the C extension)"
        assert info.run_deps_for(python=python, blas="mkl")
    assert set(info.cudas) <= set(cuda_versions())
    assert info.mutex in ("cpuonly-feature", "pytorch-mutex")
    assert info.build_command in (
        "python setup.py install",
        "pip install . --no-deps --no-build-isolation -v",
    )


def test_facts_from_the_builder_reference():
    assert pytorch_info("1.8.0").pythons == ("3.6", "3.7", "3.8", "3.9")
    assert pytorch_info("1.8.0").mutex == "cpuonly-feature"
    assert pytorch_info("1.10.0").mutex == "pytorch-mutex"
    assert pytorch_info("1.8.0").build_command == "python setup.py install"
    assert pytorch_info("1.8.0").static_cudnn and pytorch_info("1.8.0").static_nccl
    assert pytorch_info("1.8.0").build_split_cuda and not pytorch_info("2.4.1").build_split_cuda
    # builder's release/2.4 conda/pytorch-nightly/meta.yaml: numpy=1.22.3 for py38 (oldest = ABI-safe pin)
    assert pytorch_info("2.4.1").pin("numpy", "3.8") == "1.22.3"
    assert pytorch_info("2.2.0").pin("mkl", "3.12") == "2023.1"
    assert pytorch_info("2.2.0").pin("mkl", "3.11") == "2020.2"
    assert dict(pytorch_info("2.4.1").extra_env)["_GLIBCXX_USE_CXX11_ABI"] == "0"
    assert "11.1" in pytorch_info("1.8.1").cudas
    assert "3.14" in pytorch_info("2.9.0").pythons and "3.9" not in pytorch_info("2.9.0").pythons


def test_run_deps_follow_blas_and_python():
    info = pytorch_info("1.8.0")
    assert "dataclasses" in info.run_deps_for(python="3.6", blas="mkl")
    assert "dataclasses" not in info.run_deps_for(python="3.8", blas="mkl")
    assert "libgomp" in info.run_deps_for(python="3.8", blas="mkl")  # gcc's OpenMP runtime, linked
    openblas = info.run_deps_for(python="3.8", blas="openblas")
    assert "openblas" in openblas and not any("mkl" in d for d in openblas)


@pytest.mark.parametrize("version", ["1.7.1", "2.4", "2.4.9", "3.0.0", "latest", ""])
def test_unknown_version_is_one_line_and_lists_the_releases(version):
    with pytest.raises(UsageError) as err:
        pytorch_info(version)
    msg = str(err.value)
    assert "\n" not in msg
    assert "valid: 1.8.0 1.8.1" in msg and "2.4.1" in msg


def test_pin_for_a_python_the_series_does_not_support_is_refused():
    with pytest.raises(UsageError, match=r"python 3\.13 is not one of 3\.8 3\.9 3\.10 3\.11 3\.12"):
        pytorch_info("2.4.1").pin("numpy", "3.13")


def test_a_pair_the_real_source_cannot_compile_is_refused_with_the_reason_and_the_nearest_pairs() -> None:
    from condapipe.buildspec.settings import spec_from_flags

    with pytest.raises(UsageError) as refused:
        spec_from_flags("pytorch", {"version": "2.6.0", "cuda": ("13.0",), "python": ("3.11",)})
    message = str(refused.value)
    assert "cub::TransformInputIterator" in message
    assert "--version 2.6.0 --cuda 12.6" in message and "--version 2.9.0 --cuda 13.0" in message
    # the nearest pairs themselves are accepted
    assert spec_from_flags("pytorch", {"version": "2.6.0", "cuda": ("12.6",), "python": ("3.11",)})
    assert spec_from_flags("pytorch", {"version": "2.9.0", "cuda": ("13.0",), "python": ("3.11",)})


def test_every_release_built_upstream_for_a_cuda_is_not_refused_for_it() -> None:
    # The refusals never contradict what upstream itself built.
    from condapipe.buildspec.pairs import pair_verdict

    for version in pytorch_versions():
        for cuda in pytorch_info(version).cudas:
            assert pair_verdict(version, cuda).offered, (version, cuda)

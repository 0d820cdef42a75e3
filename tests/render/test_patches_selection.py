"""applicable() picks exactly the fixes a build needs, in a stable order, and explains itself."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from patches_helpers import entry, write_catalog

from condapipe.buildspec.build_spec import PLATFORMS
from condapipe.errors import UsageError
from condapipe.render.patch_catalog import applicable, config_env, load_catalog, patch_files

SHIPPED = load_catalog()


def ids(package, version, cuda, platform="linux-64"):
    return [e.id for e in applicable(package, version, cuda, platform)]


def test_pytorch_1_13_with_cuda_11_8_gets_the_cpp_extension_fix_and_the_cmake4_setting():
    assert ids("pytorch", "1.13.0", "11.8") == [
        "pytorch-cmake4-policy-minimum",
        "pytorch-cpp-extension-cuda-11.8",
    ]


def test_a_cpu_build_never_gets_cuda_scoped_fixes():
    assert ids("pytorch", "1.13.0", None) == ["pytorch-cmake4-policy-minimum"]
    assert ids("pytorch", "1.13.0", "cpu") == ["pytorch-cmake4-policy-minimum"]


def test_jetson_gets_no_nccl_and_512_threads_on_pytorch_1x_with_cuda_10():
    selected = applicable("pytorch", "1.8.0", "10.2", "linux-aarch64")
    assert [e.id for e in selected] == [
        "pytorch-cmake4-policy-minimum",
        "pytorch-jetson-no-nccl",
        "pytorch-jetson-cuda-num-threads-512",
    ]
    assert config_env(selected) == {"CMAKE_POLICY_VERSION_MINIMUM": "3.5", "USE_NCCL": "0"}
    assert [p.name for p in patch_files(selected)] == ["cuda-num-threads-512-jetson.patch"]


def test_jetson_fixes_follow_the_board_when_the_caller_names_it():
    def on(board):
        return [e.id for e in applicable("pytorch", "1.10.0", "10.2", "linux-aarch64", board=board)]

    assert "pytorch-jetson-cuda-num-threads-512" in on("tx2")
    assert "pytorch-jetson-cuda-num-threads-512" in on("nano")
    # Xavier allows 64K registers per block: NCCL stays off, 1024 threads stay.
    assert "pytorch-jetson-cuda-num-threads-512" not in on("xavier")
    assert "pytorch-jetson-no-nccl" in on("xavier")
    # An aarch64 server (Grace, SBSA) is not a Jetson: it keeps NCCL.
    assert [i for i in on(None) if "jetson" in i] == []


def test_the_same_build_on_x86_gets_neither_jetson_fix():
    assert ids("pytorch", "1.8.0", "10.2", "linux-64") == ["pytorch-cmake4-policy-minimum"]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2.0.0", ["pytorch-select-compute-arch-two-digit-major-2.0"]),
        ("2.3.1", ["pytorch-select-compute-arch-two-digit-major-2.0"]),
        ("2.4.0", ["pytorch-select-compute-arch-two-digit-major-2.4"]),
        ("2.5.1", ["pytorch-select-compute-arch-two-digit-major-2.4"]),
        ("2.6.0", []),  # accepts 12.0 upstream
        ("2.8.0", []),
    ],
)
def test_rtx_5090_arch_fix_matches_the_file_layout_of_each_release(version, expected):
    patches = [e.id for e in applicable("pytorch", version, "12.8", "linux-64") if e.kind == "patch"]
    assert patches == expected


CUDA13_BACKPORTS_2_6 = [
    "pytorch-cuda13-find-cub-cccl-2.6",
    "pytorch-cuda13-cccl3-cub-iterators-2.6",
    "pytorch-cuda13-cufft-removed-status-codes-2.6",
    "pytorch-cuda13-cudnn-frontend-graph-edge-data-2.6",
    "pytorch-cuda13-tensorpipe-compute-mode-2.6",
]


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_pytorch_2_6_on_cuda_13_gets_its_five_backports_in_order(platform):
    patches = [e.id for e in applicable("pytorch", "2.6.0", "13.0", platform) if e.kind == "patch"]
    assert patches == CUDA13_BACKPORTS_2_6
    # configure first: FindCUB must find include/cccl before any source file matters
    files = [f.name for f in patch_files(applicable("pytorch", "2.6.0", "13.0", platform))]
    assert files[0] == "cuda13-find-cub-cccl-2.6.patch"


@pytest.mark.parametrize(
    ("version", "cuda"),
    [
        ("2.6.0", "12.6"),  # CUDA 12 still has cub's iterators, cuFFT's codes and the old graph API
        ("2.6.0", "12.8"),
        ("2.6.0", "cpu"),
        ("2.5.1", "13.0"),  # other releases' files differ: proven on 2.6 only
        ("2.7.0", "13.0"),
    ],
)
def test_cuda13_backports_stay_out_of_builds_they_were_not_proven_for(version, cuda):
    selected = set(ids("pytorch", version, cuda))
    assert not selected & set(CUDA13_BACKPORTS_2_6)


def test_cuda13_backports_name_the_upstream_change_and_what_they_touch():
    for entry_id in CUDA13_BACKPORTS_2_6:
        entry = SHIPPED.get(entry_id)
        assert entry.checked_on == ("2.6.0",)
        assert entry.upstream and entry.reason
    cub = SHIPPED.get("pytorch-cuda13-cccl3-cub-iterators-2.6")
    assert "pytorch/pytorch#153373" in cub.upstream
    assert "aten/src/ATen/cuda/cub.cuh" in cub.target_files
    tensorpipe = SHIPPED.get("pytorch-cuda13-tensorpipe-compute-mode-2.6")
    assert "pytorch/tensorpipe#464" in tensorpipe.upstream
    assert "third_party/tensorpipe/tensorpipe/channel/cuda_ipc/context_impl.cc" in tensorpipe.target_files


def test_cmake4_setting_stops_where_pytorch_fixed_its_submodules():
    assert "pytorch-cmake4-policy-minimum" in ids("pytorch", "2.7.1", None)
    assert "pytorch-cmake4-policy-minimum" not in ids("pytorch", "2.8.0", None)


def test_nightly_and_local_versions_are_scoped_like_their_release():
    assert "pytorch-cpp-extension-cuda-11.8" in ids("pytorch", "1.13.1+cu118", "11.8")
    assert "pytorch-select-compute-arch-two-digit-major-2.4" in ids("pytorch", "2.5.0a0", "12.8")


def test_magma_2_6_1_for_cuda_12_gets_the_pytorch_style_static_build_and_texture_free_gemm():
    assert ids("magma", "2.6.1", "12.6") == [
        "magma-cmake4-policy-minimum",
        "magma-cmakelists-static-pic",
        "magma-cmake4-drop-cmp0037-old",
        "magma-thread-queue-no-exceptions",
        "magma-getrf-batched-smallsq-noshfl-2.6",
        "magma-getrf-batched-recnb-16",
        "magma-cuda12-fermi-gemm-no-texture",
    ]


def test_magma_2_5_2_needs_the_pointer_attribute_fix_only_from_cuda_11():
    assert "magma-cuda11-pointer-attributes" in ids("magma", "2.5.2", "11.0")
    assert "magma-cuda11-pointer-attributes" not in ids("magma", "2.5.2", "10.2")
    assert "magma-cuda11-pointer-attributes" not in ids("magma", "2.5.4", "11.8")


def test_magma_cuda13_fix_matches_each_layout_and_is_not_applied_to_2_10_which_has_it():
    assert "magma-cuda13-device-clock-rate-2.6" in ids("magma", "2.6.1", "13.0")
    assert "magma-cuda13-device-clock-rate-2.6.2" in ids("magma", "2.9.0", "13.0")
    assert not [i for i in ids("magma", "2.10.0", "13.0") if "cuda13" in i]
    assert not [i for i in ids("magma", "2.9.0", "12.9") if "cuda13" in i]


def test_packages_without_entries_get_nothing():
    assert applicable("cuda-smoke", "1.0", "12.8", "linux-64") == []


def test_invalid_input_is_a_one_line_usage_error():
    with pytest.raises(UsageError, match=r"invalid version 'one\.two'"):
        applicable("pytorch", "one.two", None, "linux-64")
    with pytest.raises(UsageError, match=r"invalid CUDA version '11\.x'"):
        applicable("pytorch", "1.13.0", "11.x", "linux-64")
    with pytest.raises(UsageError, match="unknown platform 'osx-64'; choose one of linux-64, linux-aarch64"):
        applicable("pytorch", "1.13.0", None, "osx-64")


def test_selection_follows_catalog_order_not_input_order(tmp_path):
    entries = [
        entry("third", kind="config", env={"C": "1"}, versions=">=1"),
        entry("first", kind="config", env={"A": "1"}),
        entry("second", kind="config", env={"B": "1"}, cuda=">=11"),
    ]
    cat = load_catalog(write_catalog(tmp_path, entries))
    assert [e.id for e in applicable("demo", "1.0", "11.8", "linux-64", catalog=cat)] == [
        "third",
        "first",
        "second",
    ]
    assert config_env(applicable("demo", "0.5", None, "linux-64", catalog=cat)) == {"A": "1"}


VERSIONS = st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.integers(0, 3), st.integers(0, 14), st.integers(0, 3))
CUDAS = st.one_of(st.none(), st.sampled_from(["9.2", "10.2", "11.0", "11.8", "12.1", "12.8", "13.0"]))


@given(
    package=st.sampled_from(["pytorch", "magma"]),
    version=VERSIONS,
    cuda=CUDAS,
    platform=st.sampled_from(PLATFORMS),
)
def test_selection_is_a_stable_subsequence_of_the_catalog_without_conflicting_variants(
    package, version, cuda, platform
):
    selected = applicable(package, version, cuda, platform, catalog=SHIPPED)
    order = [e.id for e in SHIPPED.entries]
    positions = [order.index(e.id) for e in selected]
    assert positions == sorted(positions)
    assert selected == applicable(package, version, cuda, platform, catalog=SHIPPED)
    # Per-release variants of one fix (ids ending in -<major>.<minor>) never apply together.
    stems = [e.id.rsplit("-", 1)[0] for e in selected if e.id.rsplit("-", 1)[-1][:1].isdigit()]
    assert len(stems) == len(set(stems))
    for e in selected:
        assert e.package == package and platform in e.platforms
        if e.cuda:
            assert cuda is not None


def test_magma_2_7_0_still_drops_the_fermi_kernels_for_cuda_12_and_2_7_1_has_none_to_drop():
    # magma v2.7.0 still builds magmablas/zgemm_fermi.cu (texture references, gone in CUDA 12);
    # v2.7.1 deleted it (icl-utk-edu/magma tags).
    assert "magma-cuda12-fermi-gemm-no-texture" in ids("magma", "2.7.0", "12.1")
    assert "magma-cuda12-fermi-gemm-no-texture" not in ids("magma", "2.7.1", "12.1")
    assert "magma-cuda12-fermi-gemm-no-texture" not in ids("magma", "2.7.0", "11.8")

"""rpath rules: conda-build's semantics plus pytorch/builder's per-directory scheme."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from condapipe.errors import UsageError
from condapipe.fix.rpath import decide, guess_build_prefix, origin_relative, rules_for

PREFIX = "/home/ci/conda-bld/torch_1700000000/_h_env_placehold_placehold_placehold"
DEFAULT = rules_for("default")
TORCH = rules_for("pytorch")


def test_in_prefix_absolute_entries_become_origin_relative() -> None:
    d = decide("lib/libfoo.so", f"{PREFIX}/lib:{PREFIX}/lib/stubs", DEFAULT, prefixes=(PREFIX,))
    assert d.entries == ("$ORIGIN", "$ORIGIN/stubs")
    assert d.warnings == ()


def test_origin_entries_are_kept_and_extra_rpaths_appended_without_duplicates() -> None:
    d = decide("bin/tool", "$ORIGIN/../lib:$ORIGIN/../share", DEFAULT)
    assert d.value == "$ORIGIN/../lib:$ORIGIN/../share"


def test_entries_outside_the_prefix_are_dropped_with_a_warning() -> None:
    d = decide("lib/libfoo.so", "/usr/local/cuda/lib64:$ORIGIN", DEFAULT, prefixes=(PREFIX,))
    assert d.entries == ("$ORIGIN",)
    assert d.warnings == ("lib/libfoo.so: rpath /usr/local/cuda/lib64 is outside the prefix (removing it)",)


def test_conda_and_rattler_placeholders_are_recognised_without_an_explicit_prefix() -> None:
    rattler = "/tmp/rb/bld/rattler-build_demo_1/host_env_placehold_placehold_placehold/lib"
    assert guess_build_prefix(rattler) == rattler[: -len("/lib")]
    assert decide("lib/libfoo.so", f"{PREFIX}/lib", DEFAULT).entries == ("$ORIGIN",)
    assert guess_build_prefix("/usr/lib") is None


def test_pytorch_builder_scheme_for_torch_and_torch_lib() -> None:
    sp = "lib/python3.11/site-packages/torch"
    top = decide(f"{sp}/_C.cpython-311-x86_64-linux-gnu.so", f"{PREFIX}/lib", TORCH, prefixes=(PREFIX,))
    assert top.value == "$ORIGIN:$ORIGIN/lib:$ORIGIN/../../.."
    lib = decide(f"{sp}/lib/libtorch_cuda.so", "/usr/local/cuda/lib64", TORCH, prefixes=(PREFIX,))
    assert lib.value == "$ORIGIN:$ORIGIN/../../../.."
    other = decide("bin/torchrun-helper", None, TORCH)
    assert other.value == "$ORIGIN/../lib"


def test_a_package_of_no_family_gets_the_default_rules_and_extra_rpaths_add_up() -> None:
    rules = rules_for(None).with_extra(("lib/stubs",))
    assert rules.family == "default"
    assert decide("lib/libx.so", None, rules).value == "$ORIGIN:$ORIGIN/stubs"


def test_an_unknown_family_gets_no_rules_at_all() -> None:
    # a misspelt --family must not fix a package with the default rules
    with pytest.raises(UsageError, match="unknown package 'no-such-family'"):
        rules_for("no-such-family")


def test_vendored_names_kept_for_cudnn_and_nvrtc_builtins_only() -> None:
    assert TORCH.keeps_name("libcudnn_ops.so.9")
    assert TORCH.keeps_name("libnvrtc-builtins.so.12.8")
    assert not TORCH.keeps_name("libcupti.so.12")


def test_file_paths_must_be_relative_to_the_prefix() -> None:
    with pytest.raises(UsageError):
        decide("/abs/lib/libx.so", None, DEFAULT)
    with pytest.raises(UsageError):
        decide("../lib/libx.so", None, DEFAULT)


_component = st.text(alphabet="abcdefgh0123456789_-", min_size=1, max_size=8)
_relpath = st.lists(_component, min_size=1, max_size=5).map("/".join)


@given(file_rel=_relpath, target_rel=_relpath)
def test_every_in_prefix_entry_resolves_back_to_the_same_folder(file_rel: str, target_rel: str) -> None:
    """Property: $ORIGIN/<rel> from the file's folder reaches exactly the old absolute folder."""
    d = decide(
        file_rel,
        f"{PREFIX}/{target_rel}",
        rules_for("default").__class__(extra_rpaths=()),
        prefixes=(PREFIX,),
    )
    (entry,) = d.entries
    assert entry.startswith("$ORIGIN")
    reached = posixpath.normpath(
        posixpath.join(posixpath.dirname(file_rel), entry[len("$ORIGIN") :].lstrip("/"))
    )
    assert reached == posixpath.normpath(target_rel)


@given(file_rel=_relpath)
def test_origin_relative_to_own_folder_is_plain_origin(file_rel: str) -> None:
    assert origin_relative(posixpath.dirname(file_rel) or ".", file_rel) == "$ORIGIN"


def test_an_rpath_the_loader_searches_the_same_way_is_not_a_change() -> None:
    """What lets fix leave an engine's relinking alone (and the package uncompressed again)."""
    from condapipe.fix.rpath import same_search_path

    assert same_search_path("$ORIGIN/", "$ORIGIN")
    assert same_search_path("$ORIGIN/../lib/:$ORIGIN/../lib", "$ORIGIN/../lib")
    assert same_search_path("$ORIGIN/./lib", "$ORIGIN/lib")
    assert not same_search_path("$ORIGIN/../lib:$ORIGIN", "$ORIGIN:$ORIGIN/../lib")  # order is search order
    assert not same_search_path("$ORIGIN::/usr/lib", "$ORIGIN:/usr/lib")  # an empty entry is the cwd
    assert not same_search_path(None, "$ORIGIN")
    assert same_search_path(None, "")

"""The shipped patch catalog is consistent, and a broken catalog is refused with a one-line reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from patches_helpers import entry, unified_diff, write_catalog

from condapipe.buildspec.build_spec import PLATFORMS
from condapipe.errors import UsageError
from condapipe.render.patch_catalog import check_consistency, load_catalog, patch_targets

SHIPPED = load_catalog()
PATCHES = [e for e in SHIPPED.entries if e.kind == "patch"]


def test_shipped_catalog_has_no_defects():
    assert check_consistency(SHIPPED) == []


def test_shipped_catalog_covers_pytorch_and_magma_with_patches_and_config_fixes():
    kinds = {(e.package, e.kind) for e in SHIPPED.entries}
    assert kinds >= {("pytorch", "patch"), ("pytorch", "config"), ("magma", "patch"), ("magma", "config")}


@pytest.mark.parametrize("e", PATCHES, ids=lambda e: e.id)
def test_every_patch_file_exists_and_edits_exactly_its_declared_targets(e):
    assert e.patch_file is not None and e.patch_file.is_file()
    assert e.patch_file.is_relative_to(SHIPPED.path.parent / e.package)
    assert set(patch_targets(e.patch_file)) == set(e.target_files)
    text = e.patch_file.read_text()
    assert text.startswith("--- a/") and "\n+++ b/" in text and "\n@@ -" in text


@pytest.mark.parametrize("e", SHIPPED.entries, ids=lambda e: e.id)
def test_every_entry_says_why_and_where_upstream_and_is_scoped(e):
    assert e.reason and "\n" not in e.reason
    assert e.upstream
    assert e.platforms and set(e.platforms) <= set(PLATFORMS)
    SpecifierSet(e.versions)
    SpecifierSet(e.cuda)


@pytest.mark.parametrize("e", PATCHES, ids=lambda e: e.id)
def test_every_patch_names_the_upstream_releases_it_was_checked_on_inside_its_range(e):
    assert e.checked_on, f"{e.id} lists no upstream versions it was checked against"
    for v in e.checked_on:
        assert SpecifierSet(e.versions).contains(Version(v), prereleases=True)


def test_config_fixes_carry_environment_instead_of_a_patch():
    configs = [e for e in SHIPPED.entries if e.kind == "config"]
    env = {k: v for e in configs for k, v in e.env}
    assert env["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5"
    assert env["USE_NCCL"] == "0"
    assert all(e.patch_file is None and not e.target_files for e in configs)


# --- a broken catalog is refused --------------------------------------------------------------


def _demo_patch(tmp_path: Path) -> str:
    return unified_diff("src/a.c", "int a = 1;\n", "int a = 2;\n")


def test_missing_patch_file_is_reported_with_the_entry_id(tmp_path):
    index = write_catalog(tmp_path, [entry("demo-fix", patch="demo/nope.patch", targets=["src/a.c"])])
    with pytest.raises(UsageError, match=r"demo-fix: patch file .*nope.patch does not exist"):
        load_catalog(index)


def test_declared_targets_must_match_what_the_patch_edits(tmp_path):
    index = write_catalog(
        tmp_path,
        [entry("demo-fix", patch="demo/fix.patch", targets=["src/other.c"])],
        {"demo/fix.patch": _demo_patch(tmp_path)},
    )
    with pytest.raises(UsageError, match=r"demo-fix: targets \['src/other.c'\] differ .*\['src/a.c'\]"):
        load_catalog(index)


def test_a_range_that_is_not_pep440_is_refused(tmp_path):
    index = write_catalog(
        tmp_path,
        [entry("demo-fix", patch="demo/fix.patch", targets=["src/a.c"], versions="1.13+")],
        {"demo/fix.patch": _demo_patch(tmp_path)},
    )
    with pytest.raises(UsageError, match=r"'versions' is not a PEP 440 range: '1.13\+'"):
        load_catalog(index)


def test_unknown_keys_and_platforms_are_refused(tmp_path):
    index = write_catalog(tmp_path / "a", [entry("x", kind="config", env={"A": "1"}, applies="always")])
    with pytest.raises(UsageError, match="unknown key"):
        load_catalog(index)
    index = write_catalog(tmp_path / "b", [entry("x", kind="config", env={"A": "1"}, platforms=["win-64"])])
    with pytest.raises(UsageError, match="platforms must be"):
        load_catalog(index)


def test_board_entries_must_name_known_jetson_boards_on_aarch64(tmp_path):
    bad = entry("x", kind="config", env={"A": "1"}, platforms=["linux-aarch64"], boards=["tx9"])
    with pytest.raises(UsageError, match="unknown Jetson board 'tx9'"):
        load_catalog(write_catalog(tmp_path / "a", [bad]))
    x86 = entry("x", kind="config", env={"A": "1"}, boards=["tx2"])
    with pytest.raises(UsageError, match="entries for Jetson boards are for platform linux-aarch64 only"):
        load_catalog(write_catalog(tmp_path / "b", [x86]))


def test_duplicate_ids_are_refused(tmp_path):
    e = entry("same", kind="config", env={"A": "1"})
    with pytest.raises(UsageError, match="duplicate id 'same'"):
        load_catalog(write_catalog(tmp_path, [e, dict(e)]))


def test_config_entries_need_env_and_patch_entries_cannot_set_env(tmp_path):
    with pytest.raises(UsageError, match="kind 'config' needs 'env'"):
        load_catalog(write_catalog(tmp_path / "a", [entry("c", kind="config")]))
    index = write_catalog(
        tmp_path / "b",
        [entry("p", patch="demo/fix.patch", targets=["src/a.c"], env={"A": "1"})],
        {"demo/fix.patch": _demo_patch(tmp_path)},
    )
    with pytest.raises(UsageError, match="kind 'patch' cannot set env"):
        load_catalog(index)


def test_contradictory_config_for_overlapping_builds_is_refused(tmp_path):
    entries = [
        entry("old", kind="config", env={"USE_X": "0"}, versions="<2.0"),
        entry("new", kind="config", env={"USE_X": "1"}, versions=">=1.9"),
    ]
    with pytest.raises(UsageError, match="old and new both apply to some builds but set USE_X=0 vs 1"):
        load_catalog(write_catalog(tmp_path, entries))


def test_different_values_for_disjoint_builds_are_not_a_contradiction(tmp_path):
    entries = [
        entry("old", kind="config", env={"USE_X": "0"}, versions="<2.0"),
        entry("new", kind="config", env={"USE_X": "1"}, versions=">=2.0"),
        entry("arm", kind="config", env={"USE_Y": "0"}, platforms=["linux-aarch64"]),
        entry("x86", kind="config", env={"USE_Y": "1"}, platforms=["linux-64"]),
        entry("cu11", kind="config", env={"USE_Z": "0"}, cuda="<12"),
        entry("cu12", kind="config", env={"USE_Z": "1"}, cuda=">=12"),
        entry("tx2", kind="config", env={"T": "512"}, platforms=["linux-aarch64"], boards=["tx2"]),
        entry("orin", kind="config", env={"T": "1024"}, platforms=["linux-aarch64"], boards=["orin"]),
    ]
    assert [e.id for e in load_catalog(write_catalog(tmp_path, entries)).entries] == [
        "old",
        "new",
        "arm",
        "x86",
        "cu11",
        "cu12",
        "tx2",
        "orin",
    ]


def test_checked_on_versions_outside_the_range_are_refused(tmp_path):
    index = write_catalog(
        tmp_path,
        [entry("p", patch="demo/fix.patch", targets=["src/a.c"], versions="<2", checked_on=["2.1.0"])],
        {"demo/fix.patch": _demo_patch(tmp_path)},
    )
    with pytest.raises(UsageError, match=r"checked_on 2\.1\.0 is outside its range '<2'"):
        load_catalog(index)


def test_invalid_yaml_is_one_line_usage_error(tmp_path):
    index = tmp_path / "index.yaml"
    index.write_text("entries: [unclosed\n")
    with pytest.raises(UsageError, match="is not valid YAML") as info:
        load_catalog(index)
    assert "\n" not in str(info.value)

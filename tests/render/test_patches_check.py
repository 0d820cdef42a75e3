"""`patches check` tells, per patch, applies / already applied / fails with the rejected hunk.

Every test writes a small synthetic source tree and real unified diffs, and runs GNU patch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import needs_system_tool
from patches_helpers import entry, unified_diff, write_catalog, write_tree

from condapipe.cli.main import main
from condapipe.render.patch_catalog import load_catalog
from condapipe.render.patch_check import ALREADY_APPLIED, APPLIES, CONFIG, FAILS, check_entries, parse_hunks

pytestmark = needs_system_tool("patch")

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 41))
FIXED = ORIGINAL.replace("line 5\n", "line 5 fixed\n").replace("line 30\n", "line 30 fixed\n")
FIXED_TWICE = FIXED.replace("line 31\n", "line 31 fixed too\n")
CONFIG_H = "#define THREADS 1024\n"


@pytest.fixture
def catalog(tmp_path: Path):
    """Two patches on the same file (the second needs the first) plus a config fix."""
    patches = {
        "demo/fix.patch": unified_diff("src/kernel.c", ORIGINAL, FIXED),
        "demo/followup.patch": unified_diff("src/kernel.c", FIXED, FIXED_TWICE),
        "demo/threads.patch": unified_diff("include/config.h", CONFIG_H, "#define THREADS 512\n"),
    }
    entries = [
        entry("demo-fix", patch="demo/fix.patch", targets=["src/kernel.c"]),
        entry("demo-followup", patch="demo/followup.patch", targets=["src/kernel.c"]),
        entry("demo-threads", patch="demo/threads.patch", targets=["include/config.h"], cuda="<11"),
        entry("demo-env", kind="config", env={"USE_NCCL": "0"}),
    ]
    return load_catalog(write_catalog(tmp_path / "catalog", entries, patches))


def statuses(results):
    return {r.entry_id: r.status for r in results}


def test_pristine_tree_every_patch_applies_in_order_and_the_tree_is_untouched(tmp_path, catalog):
    src = write_tree(tmp_path / "src", {"src/kernel.c": ORIGINAL, "include/config.h": CONFIG_H})
    results = check_entries(catalog.entries, src)
    assert statuses(results) == {
        "demo-fix": APPLIES,
        "demo-followup": APPLIES,  # only applies on top of demo-fix
        "demo-threads": APPLIES,
        "demo-env": CONFIG,
    }
    assert (src / "src/kernel.c").read_text() == ORIGINAL
    assert (src / "include/config.h").read_text() == CONFIG_H


def test_a_tree_that_already_has_the_change_is_reported_as_already_applied(tmp_path, catalog):
    src = write_tree(tmp_path / "src", {"src/kernel.c": FIXED, "include/config.h": CONFIG_H})
    results = statuses(check_entries(catalog.entries[:1], src))
    assert results == {"demo-fix": ALREADY_APPLIED}


def test_drifted_upstream_fails_and_names_the_rejected_hunk(tmp_path, catalog):
    drifted = ORIGINAL.replace("line 29\n", "line 29 changed upstream\n")
    src = write_tree(tmp_path / "src", {"src/kernel.c": drifted, "include/config.h": CONFIG_H})
    (result,) = check_entries(catalog.entries[:1], src)
    assert result.status == FAILS and not result.ok
    assert [(h.file, h.number) for h in result.rejected] == [("src/kernel.c", 2)]
    assert "src/kernel.c hunk #2 (@@ -27,7 +27,7 @@)" in result.detail
    assert "-line 30\n+line 30 fixed" in result.rejected[0].text
    assert (src / "src/kernel.c").read_text() == drifted


def test_a_hunk_that_would_need_fuzz_counts_as_failing(tmp_path, catalog):
    # Only a context line (3 lines before the change) differs: GNU patch would apply this with
    # fuzz 1, but conda-build and rattler-build need not agree, so condapipe refuses it.
    fuzzy = ORIGINAL.replace("line 2\n", "line 2 drift\n")
    src = write_tree(tmp_path / "src", {"src/kernel.c": fuzzy})
    (result,) = check_entries(catalog.entries[:1], src)
    assert result.status == FAILS
    assert [h.number for h in result.rejected] == [1]


def test_a_moved_hunk_still_applies_and_the_offset_is_reported(tmp_path, catalog):
    moved = "/* new header line */\n" * 4 + ORIGINAL
    src = write_tree(tmp_path / "src", {"src/kernel.c": moved})
    (result,) = check_entries(catalog.entries[:1], src)
    assert result.status == APPLIES
    assert result.detail == "2 hunks moved by +4 lines"


def test_a_missing_target_file_fails_with_its_path(tmp_path, catalog):
    src = write_tree(tmp_path / "src", {"README": "no sources here\n"})
    (result,) = check_entries(catalog.entries[2:3], src)
    assert result.status == FAILS
    assert result.detail == "target file missing in the source tree: include/config.h"


def test_followup_alone_fails_because_order_matters(tmp_path, catalog):
    src = write_tree(tmp_path / "src", {"src/kernel.c": ORIGINAL})
    (result,) = check_entries(catalog.entries[1:2], src)
    assert result.status == FAILS


def test_hunk_parser_counts_lines_so_removed_dash_lines_stay_in_their_hunk():
    old = "a\n-- not a header\nb\n"
    new = "a\nb\n"
    hunks = parse_hunks(unified_diff("x.sql", old, new) + unified_diff("y.sql", "1\n", "2\n"))
    assert [(h.file, h.number) for h in hunks] == [("x.sql", 1), ("y.sql", 1)]
    assert "--- not a header" in hunks[0].text


# --- the command ---------------------------------------------------------------------------


def run(*args: str):
    return CliRunner().invoke(main, ["patches", *args])


def test_cli_check_json_reports_each_patch_and_exits_1_on_a_failure(tmp_path, catalog):
    drifted = ORIGINAL.replace("line 5\n", "line 5 changed upstream\n")
    src = write_tree(tmp_path / "src", {"src/kernel.c": drifted, "include/config.h": CONFIG_H})
    res = run("check", "--source", str(src), "--for", "demo==1.0", "--cuda", "10.2",
              "--catalog", str(catalog.path), "--json")  # fmt: skip
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["ok"] is False
    by_id = {r["id"]: r for r in data["results"]}
    assert by_id["demo-fix"]["status"] == "fails"
    assert by_id["demo-fix"]["rejected_hunks"][0]["hunk"] == 1
    assert by_id["demo-followup"]["status"] == "fails"  # it needs demo-fix first
    assert by_id["demo-threads"]["status"] == "applies"
    assert by_id["demo-env"]["status"] == "config"
    assert "2 of 3 patches do not apply" in res.stderr
    assert "demo-fix, demo-followup" in res.stderr


def test_cli_check_passes_on_a_matching_tree_and_skips_what_does_not_apply(tmp_path, catalog):
    src = write_tree(tmp_path / "src", {"src/kernel.c": ORIGINAL, "include/config.h": CONFIG_H})
    res = run("check", "--source", str(src), "--for", "demo==1.0", "--cuda", "12.8",
              "--catalog", str(catalog.path), "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [r["id"] for r in data["results"]] == ["demo-fix", "demo-followup", "demo-env"]


def test_cli_check_human_output_shows_the_rejected_hunk(tmp_path, catalog):
    drifted = ORIGINAL.replace("line 30\n", "line 30 changed upstream\n")
    src = write_tree(tmp_path / "src", {"src/kernel.c": drifted})
    res = run("check", "--source", str(src), "--for", "demo==1.0", "--catalog", str(catalog.path))
    assert res.exit_code == 1
    assert "rejected hunk demo-fix: src/kernel.c #2" in res.output
    assert "+line 30 fixed" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--source", "{src}"], "needs PACKAGE --version V"),
        (["check", "--source", "{src}/nope", "--for", "pytorch==1.13.0"], "is not a directory"),
        (
            ["check", "--source", "{src}", "--for", "pytorch>=1.13"],
            "--for expects PACKAGE or PACKAGE==VERSION",
        ),
        (["list", "--for", "pytorch==1.x"], "invalid version '1.x'"),
        (["list", "--for", "tensorflow==2.0"], "no patches are catalogued for 'tensorflow'"),
        (["list", "--catalog", "{src}/missing.yaml"], "cannot read patch catalog"),
        # --cuda is read by the settings cascade, as in every command
        (["list", "pytorch", "--cuda", "garbage"], "--cuda 'garbage': write the CUDA version as X.Y"),
        (["list", "--cuda", "12.x"], "--cuda '12.x': write the CUDA version as X.Y"),
        (
            ["list", "pytorch", "--version", "2.6.0", "--cuda", "cu"],
            "--cuda 'cu': write the CUDA version as X.Y",
        ),
        (["list", "pytorch", "--version", "2.6.0", "--cuda", "12.7"], "unknown CUDA version '12.7'"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    res = run(*[a.format(src=tmp_path) for a in args])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output


def test_cli_list_explains_what_applies_and_why():
    res = run("list", "--for", "pytorch==1.13.0", "--cuda", "11.8", "--platform", "linux-64")
    assert res.exit_code == 0, res.output
    assert "pytorch-cpp-extension-cuda-11.8 (patch)" in res.output
    assert "why: 1.13 knows no gcc/clang bounds for CUDA 11.8" in res.output
    assert "upstream: pytorch/pytorch#87436" in res.output
    assert "pytorch-jetson" not in res.output


def test_cli_list_json_has_patch_paths_and_env():
    res = run("list", "--for", "pytorch==1.8.0", "--cuda", "10.2", "--jetson", "tx2", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    entries = {e["id"]: e for e in data["entries"]}
    assert entries["pytorch-jetson-no-nccl"]["env"] == {"USE_NCCL": "0"}
    assert Path(entries["pytorch-jetson-cuda-num-threads-512"]["patch_file"]).is_file()


def test_cli_list_for_a_jetson_board_and_for_an_aarch64_server():
    tx2 = run("list", "--for", "pytorch==1.10.0", "--cuda", "10.2", "--jetson", "tx2", "--json")
    server = run(
        "list", "--for", "pytorch==1.10.0", "--cuda", "10.2", "--platform", "linux-aarch64", "--json"
    )
    assert tx2.exit_code == 0 and server.exit_code == 0
    tx2_ids = {e["id"] for e in json.loads(tx2.stdout)["entries"]}
    server_ids = {e["id"] for e in json.loads(server.stdout)["entries"]}
    assert {"pytorch-jetson-no-nccl", "pytorch-jetson-cuda-num-threads-512"} <= tx2_ids
    assert not {i for i in server_ids if "jetson" in i}


def test_cli_list_without_for_shows_the_whole_catalog():
    res = run("list", "--json")
    assert res.exit_code == 0
    assert len(json.loads(res.stdout)["entries"]) == len(load_catalog().entries)


def test_cli_list_reads_the_build_from_the_config_file_as_build_does(tmp_path, monkeypatch):
    # the settings cascade: condapipe.toml names the build, a flag still wins over it
    (tmp_path / "condapipe.toml").write_text('package = "pytorch"\nversion = "1.13.1"\ncuda = "11.8"\n')
    monkeypatch.chdir(tmp_path)
    res = run("list", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert (data["for"], data["cuda"], data["platform"]) == ("pytorch==1.13.1", "11.8", "linux-64")
    assert "pytorch-cpp-extension-cuda-11.8" in [e["id"] for e in data["entries"]]
    cpu = json.loads(run("list", "--cuda", "cpu", "--json").stdout)
    assert cpu["cuda"] == "cpu" and "pytorch-cpp-extension-cuda-11.8" not in [e["id"] for e in cpu["entries"]]

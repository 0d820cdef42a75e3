"""Hostile and broken input (issue 14): packages whose members would escape or harm the machine,
damaged streams, lying metadata, hostile config files and destinations. Every one ends in a
one-line error naming the file, nothing outside the destination is touched, nothing hangs.

The packages are real archives written member by member (tests/fuzz/archives.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fuzz import archives

from condapipe.cli.main import main
from condapipe.package.io import unpack
from condapipe.package.safe_extract import UnsafePackage
from condapipe.process_settings import process_settings, use_process_settings
from condapipe.verify.verifier import verify_package

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]

# kind -> what the one-line error says (the member is named)
REFUSED = {
    "abs-member": "has an absolute path",
    "dotdot-member": "leaves the package",
    "dotdot-inner": "leaves the package",
    "abs-symlink": "member lib/out is a symlink that points to the absolute path",
    "escaping-symlink": "member lib/up is a symlink that points outside the package",
    "write-through-symlink": "member lib/out is a symlink",
    "symlink-chain": "member a is a symlink that has `..` in the middle",
    "hardlink-abs": "has an absolute path",
    "hardlink-host": "member '/etc/passwd' has an absolute path",
    "hardlink-dotdot": "leaves the package",
    "hardlink-forward": "member lib/early is a hard link to lib/later, not an earlier file",
    "fifo": "member lib/fifo is a FIFO",
    "chardev": "member lib/null is a character device",
    "blockdev": "member lib/disk is a block device",
    "setuid": "member bin/root-shell has the setuid/setgid bit",
    "setgid-dir": "member sgid has the setuid/setgid bit",
    "dir-over-file": "member lib/libdemo.txt is a folder over a file",
    "file-over-dir": "member lib replaces a folder",
    "index-fifo": "member info/about.json is a FIFO",
    "truncated-1": "damaged or truncated",
    "truncated-10": "damaged or truncated",
    "truncated-half": "damaged or truncated",
    "corrupt-middle": "damaged or truncated",
    "corrupt-late": "damaged or truncated",
    "empty": "damaged or truncated",
    "wrong-ext": "damaged or truncated",
}


@pytest.fixture
def escape(tmp_path: Path) -> Path:
    """A folder outside every destination, which escaping members aim at."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret").write_text("host secret\n")
    return folder


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"" for p in folder.rglob("*")}


@pytest.mark.parametrize("fmt", archives.FORMATS)
@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_unpacking_refuses_hostile_members_and_damage_naming_them(
    kind: str, fmt: str, tmp_path: Path, escape: Path
) -> None:
    pkg = archives.build(kind, fmt, tmp_path / "in", escape)
    before = _snapshot(escape)
    with pytest.raises(UnsafePackage) as err:
        unpack(pkg, tmp_path / "dest" / "pkg")
    assert str(pkg) in str(err.value) and REFUSED[kind] in str(err.value)
    assert _snapshot(escape) == before
    assert not (tmp_path / "pwned").exists() and not (tmp_path.parent / "pwned").exists()


def test_size_and_member_count_are_bounded_with_a_clear_error(tmp_path: Path, escape: Path) -> None:
    # what the root command does with CONDAPIPE_MAX_UNPACK_* in the environment
    limits = {"CONDAPIPE_MAX_UNPACK_BYTES": str(32 << 20), "CONDAPIPE_MAX_UNPACK_FILES": "2000"}
    use_process_settings(process_settings(limits))
    for kind, says in (
        ("big-zeros", "expands to more than 33554432 bytes at member lib/zeros"),
        ("huge-declared", "expands to more than 33554432 bytes at member lib/huge"),
        ("many-files", "more than 2000 members"),
    ):
        pkg = archives.build(kind, ".tar.bz2", tmp_path / kind, escape)
        with pytest.raises(UnsafePackage, match=says):
            unpack(pkg, tmp_path / f"out-{kind}")
        written = sum(p.stat().st_size for p in (tmp_path / f"out-{kind}").rglob("*") if p.is_file())
        assert written < 33 << 20


@pytest.mark.parametrize("fmt", archives.FORMATS)
def test_a_package_truncated_by_one_byte_fails_verify_fix_and_upload(
    fmt: str, tmp_path: Path, escape: Path
) -> None:
    pkg = archives.build("truncated-1", fmt, tmp_path / "in", escape)
    before = pkg.read_bytes()
    runner = CliRunner()
    for args in (
        ["verify", str(pkg)],
        ["fix", str(pkg)],
        ["fix", str(pkg), "-o", str(tmp_path / "out")],
        ["upload", "--json", "--to", str(tmp_path / "chan"), str(pkg)],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code in (1, 2), (args, result.output)
        assert "damaged or truncated" in result.output and "internal error" not in result.output
    assert pkg.read_bytes() == before
    assert not (tmp_path / "chan").exists()  # a refused upload creates no channel
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == [pkg.name]  # no scratch left


def test_renamed_conda_and_clean_packages_read_and_fix_round_trips_through_verify(
    tmp_path: Path, escape: Path
) -> None:
    for fmt in archives.FORMATS:
        renamed = archives.build("renamed", fmt, tmp_path / fmt, escape)
        assert verify_package(renamed).ok
        result = CliRunner().invoke(main, ["fix", str(renamed), "-o", str(tmp_path / f"out{fmt}")])
        assert result.exit_code == 0, result.output
        assert verify_package(tmp_path / f"out{fmt}" / renamed.name).ok


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("index-evil-name", "name '../../x': not a conda package name"),  # value_rules' wording
        ("index-evil-subdir", "subdir '../../..' is not a platform subdir"),
        ("bad-index-json", "info/index.json is not valid JSON"),
        ("paths-escape", "'../../../secret'"),
    ],
)
def test_lying_metadata_is_a_defect_and_never_a_path_out_of_the_channel(
    kind: str, says: str, tmp_path: Path, escape: Path
) -> None:
    pkg = archives.build(kind, ".conda", tmp_path / "in", escape)
    assert any(says in e for e in verify_package(pkg).errors)
    if kind == "paths-escape":
        return  # paths.json is only read by verify (skipped here); the channel file name is fine
    result = CliRunner().invoke(main, ["upload", "--no-verify", "--to", str(tmp_path / "chan"), str(pkg)])
    assert result.exit_code == 2 and says in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "outside"]


def test_a_corrupt_package_in_a_channel_is_named_and_nothing_is_half_written(
    tmp_path: Path, escape: Path
) -> None:
    chan = tmp_path / "chan"
    archives.build("clean", ".conda", chan / "noarch", escape)
    bad = archives.build("bad-index-json", ".tar.bz2", chan / "linux-64", escape)
    result = CliRunner().invoke(main, ["index", str(chan)])
    assert result.exit_code == 2 and str(bad) in result.stderr and "not valid JSON" in result.stderr
    assert not (chan / ".tmp").exists() and not (chan / "noarch" / "repodata.json").exists()
    bad.unlink()
    (chan / "linux-64" / "repodata.json").mkdir()
    result = CliRunner().invoke(main, ["index", str(chan)])
    assert result.exit_code == 2 and "repodata.json: expected a file" in result.stderr


def test_index_refuses_a_folder_that_is_not_a_channel_unless_init(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    refused = CliRunner().invoke(main, ["index", str(tmp_path)])
    assert refused.exit_code == 2 and "not a conda channel" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert CliRunner().invoke(main, ["index", str(tmp_path), "--init"]).exit_code == 0
    assert (tmp_path / "noarch" / "repodata.json").is_file()


def test_index_exit_status_is_the_truth_over_many_runs(tmp_path: Path, escape: Path) -> None:
    """py-rattler 0.28 can abort the interpreter at shutdown after work that succeeded: 40 real
    `condapipe index` processes must all exit 0 with valid repodata."""
    chan = tmp_path / "chan"
    archives.build("clean", ".conda", chan / "linux-64", escape)
    archives.build("clean", ".tar.bz2", chan / "linux-64", escape)
    codes = []
    for run in range(40):
        args = [*CLI, "index", str(chan), *(["--force"] if run % 2 else [])]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        codes.append(proc.returncode)
        repodata = json.loads((chan / "linux-64" / "repodata.json").read_text())
        assert len(repodata["packages"]) == 1 and len(repodata["packages.conda"]) == 1, proc.stderr
    assert codes == [0] * 40
    assert not (chan / ".tmp").exists()


def test_render_force_never_replaces_the_current_directory_its_parents_or_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("mine\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".bashrc").write_text("x\n")
    base = ["render", "magma", "--cuda", "12.4", "--force", "-o"]
    for target in (".", str(work), "..", str(tmp_path / "home"), "sub/..", "/", ""):
        result = CliRunner().invoke(main, [*base, target])
        assert result.exit_code == 2, (target, result.output)
        errors = [x for x in result.stderr.strip().splitlines() if not x.startswith("chose ")]
        assert len(errors) == 1
    assert (work / "keep.txt").read_text() == "mine\n" and (tmp_path / "home" / ".bashrc").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "work"]  # no ..old-XXXX beside it


def test_fix_needs_a_prefix_or_package_tree_and_refuses_empty_and_root(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_bytes(b"\x7fELF")
    for args, says in (
        (["fix", str(tmp_path)], "not a conda prefix"),
        (["fix", ""], "an empty path is not a folder"),
        (["fix", "/"], "refusing to use the filesystem root"),
        (["fix", str(tmp_path / "x.conda"), "-o", ""], "an empty path"),
        (["upload", "--to", "file:///", str(tmp_path / "x.conda")], "refusing to use the filesystem root"),
        (["upload", "--to", "", str(tmp_path / "x.conda")], "an empty path"),
        (["index", ""], "an empty path"),
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2 and says in result.stderr, (args, result.output)
    assert tool.read_bytes() == b"\x7fELF"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--cuda", "cu124"], "write the CUDA version as X.Y"),
        (["--cuda", "cuda12.4"], "write the CUDA version as X.Y"),
        (["--cuda", "12.4.1"], "write the CUDA version as X.Y"),
        (["--python", "py3.10"], "write it like 3.10"),
        (["--python", "3.10.1"], "write it like 3.10"),
        (["--build-number", "99999999999999999999999"], "at most 2147483647"),
        (["--platform", ""], "--platform: an empty value"),
    ],
)
def test_near_miss_spec_values_are_refused_with_the_expected_form(
    flags: list[str], says: str, tmp_path: Path
) -> None:
    args = ["render", "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.10", *flags]
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 2 and says in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2  # --json errors are JSON too
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "body",
    ["tool = 5\n", 'tool = "x"\n', 'tool = "condapipe"\n', "tool = [1]\n", "a = " + "[" * 3000 + "]" * 3000],
)
def test_hostile_pyproject_is_a_one_line_error_or_ignored(body: str, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(body)
    proc = subprocess.run([*CLI, "config", "show"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 2), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["config", "show", "--config", "{fifo}"],
        ["patches", "list", "--catalog", "{fifo}"],
        ["verify", "{fifo}.conda"],
    ],
)
def test_a_fifo_given_as_a_file_is_refused_not_read(args: list[str], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    if args[0] == "verify":
        os.mkfifo(tmp_path / "pipe.conda")
    argv = [a.format(fifo=fifo) for a in args]
    proc = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr


def test_binary_catalog_and_bad_upload_settings_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "cat.yaml").write_bytes(b"\xff\xfe\x00binary")
    result = CliRunner().invoke(main, ["patches", "list", "--catalog", str(tmp_path / "cat.yaml")])
    assert result.exit_code == 2 and "not UTF-8" in result.stderr
    (tmp_path / "condapipe.toml").write_text("[upload]\nsite_url = 5\n")
    result = CliRunner().invoke(main, ["upload", "--config", str(tmp_path / "condapipe.toml")])
    assert result.exit_code == 2 and "upload.site_url" in result.stderr
    for args in (["--site-url", "ftp://h/"], ["--retry-delay", "nan"]):
        result = CliRunner().invoke(main, ["upload", "--channel", "o", *args, str(tmp_path / "x.conda")])
        assert result.exit_code == 2, result.output


def test_a_bad_compression_level_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for level, fmt in (("0", "conda"), ("23", "conda"), ("10", "tar.bz2")):
        args = ["build", "magma", "--cuda", "12.4", "--package-format", fmt, "--compression-level", level]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2 and "--compression-level" in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []


def test_the_unpack_limits_come_from_the_environment_of_the_command(tmp_path: Path, escape: Path) -> None:
    pkg = archives.build("many-files", ".tar.bz2", tmp_path / "in", escape)
    runner = CliRunner()
    bounded = runner.invoke(main, ["verify", str(pkg)], env={"CONDAPIPE_MAX_UNPACK_FILES": "2000"})
    assert bounded.exit_code != 0 and "more than 2000 members" in bounded.output
    assert "Traceback" not in bounded.output
    bad = runner.invoke(main, ["verify", str(pkg)], env={"CONDAPIPE_MAX_UNPACK_FILES": "lots"})
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        "error: $CONDAPIPE_MAX_UNPACK_FILES must be a whole number, not 'lots'"
    ]

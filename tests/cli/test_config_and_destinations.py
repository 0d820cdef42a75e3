"""The config file's `package`, blocked builds that name the doctor command checking the same
target, destinations that cannot be written found before building, and every errno as one line
with its path and fix (issue 24, item 4).
"""

from __future__ import annotations

import errno
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from condapipe.cli.main import main
from condapipe.cli.os_errors import os_error_line

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]
SMOKE = ["--cuda", "13.0", "--arch", "9.0"]


def _run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder whose condapipe.toml names the package, as the README shows."""
    (tmp_path / "condapipe.toml").write_text(
        'package = "cuda-smoke"\ncuda = ["13.0"]\narch = "9.0"\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [["build", "--dry-run", "--force"], ["plan"], ["render", "-o", "recipe"], ["config", "show"]],
    ids=["build", "plan", "render", "config-show"],
)
def test_the_config_files_package_is_used_when_the_command_line_names_none(
    project: Path, args: list[str]
) -> None:
    code, out, err = _run(args)
    assert code == 0, err
    rendered = project / "recipe" / "recipe.yaml"
    assert "cuda-smoke" in out + err + (rendered.read_text() if rendered.exists() else "")


def test_without_package_anywhere_build_and_plan_say_how_to_name_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for command in ("build", "plan"):
        code, _, err = _run([command])
        assert code == 2
        assert err.strip() == (
            "error: no package given: name one (e.g. pytorch) or set `package` in condapipe.toml"
        )


def test_a_blocked_build_names_the_doctor_command_that_checks_the_same_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    args = ["build", "cuda-smoke", *SMOKE, "--output-dir", "a-file/channel", "--dry-run"]
    code, _, err = _run(args)
    assert code == 3
    line = err.strip().splitlines()[-1]
    hint = line.split("`")[1]
    assert hint == "condapipe doctor cuda-smoke --cuda 13.0 --arch 9.0 --output-dir a-file/channel"
    # that very command checks the same target and finds the same blocker
    code, out, derr = _run(shlex.split(hint)[1:])
    assert code == 3
    assert "condapipe doctor: cuda-smoke 1.0.0" in out
    assert "a-file is a file, not a folder" in derr


def test_an_output_dir_below_a_file_is_a_doctor_finding_of_the_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    code, _, err = _run(["build", "cuda-smoke", *SMOKE, "--output-folder", "a-file/channel", "--dry-run"])
    assert code == 3
    assert (
        f"doctor: block: --output-dir: {tmp_path}/a-file/channel: {tmp_path}/a-file is a file, "
        f"not a folder (fix: rename {tmp_path}/a-file, or choose another folder (pass --output-dir DIR))"
    ) in err
    assert not (tmp_path / ".condapipe").exists()  # a dry run writes nothing


def _read_only_mount_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp"],
        capture_output=True,
    )
    return probe.returncode == 0


needs_ro_mount = pytest.mark.skipif(
    not _read_only_mount_works(), reason="needs `unshare -m` with mount rights (a read-only bind mount)"
)


def _in_read_only(folder: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI with `folder` bind-mounted read-only (a private mount namespace: root cannot
    write there either, unlike a chmod'ed folder)."""
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    script = f"{mount} && exec {shlex.join(argv)}"
    return subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=cwd, capture_output=True, text=True)


@needs_ro_mount
def test_a_read_only_output_dir_stops_the_dry_run_with_exit_3_and_the_fix(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    argv = [*CLI, "build", "cuda-smoke", *SMOKE, "--output-dir", str(ro / "channel"), "--dry-run"]
    proc = _in_read_only(ro, argv, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: preflight: --output-dir: {ro} is on a read-only file system; ")
    )
    assert "(fix: choose a folder on a writable disk (pass --output-dir DIR))" in proc.stderr


@needs_ro_mount
def test_a_read_only_destination_met_while_writing_is_one_line_with_the_path_and_fix(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    argv = [*CLI, "plan", "cuda-smoke", *SMOKE, "--emit", "json", "-o", str(ro / "plan.json")]
    proc = _in_read_only(ro, argv, tmp_path)
    assert proc.returncode == 3
    assert proc.stderr.strip() == (
        f"error: {ro}/plan.json: on a read-only file system (fix: choose a path on a writable disk)"
    )
    assert list(ro.iterdir()) == []  # no temporary file left behind


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (errno.EACCES, "permission denied (fix: make it writable"),
        (errno.ENOTDIR, "a part of the path is a file, not a folder (fix: "),
        (errno.EEXIST, "already exists (fix: "),
        (errno.EISDIR, "is a folder where a file was expected (fix: "),
        (errno.ENOSPC, "no space left on the device (fix: free space there"),
        (errno.EROFS, "on a read-only file system (fix: choose a path on a writable disk)"),
        (errno.EDQUOT, "disk quota exceeded (fix: "),
        (errno.EMFILE, "too many open files (fix: raise the limit"),
    ],
)
def test_every_errno_is_one_line_with_the_path_and_the_fix(code: int, says: str) -> None:
    line, exit_code = os_error_line(OSError(code, "raw text", "/srv/out/channel"))
    assert line == f"error: /srv/out/channel: {says}" or line.startswith(f"error: /srv/out/channel: {says}")
    assert "\n" not in line
    assert exit_code == 3


def test_an_errno_met_for_real_reaches_the_user_as_that_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    code, _, err = _run(["plan", "cuda-smoke", *SMOKE, "--emit", "json", "-o", "a-file/plan.json"])
    assert code == 3
    assert err.strip() == (
        "error: a-file/plan.json: a part of the path is a file, not a folder "
        "(fix: rename that file or choose another path)"
    )

"""Output paths a user names are checked before any work: `plan -o` never replaces a directory, device,
FIFO or socket, replaces an existing file only with --force, never writes over condapipe.toml or
pyproject.toml, and an empty path is a usage error. A work dir that cannot hold condapipe's files is
one line naming the path and the fix, never Python's errno text. Values that used to end in an
internal error are one-line usage errors.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from condapipe.cli.main import main

EMIT = ["plan", "magma", "--cuda", "12.4", "--emit", "json"]


def _run(work: Path, argv: list[str]) -> tuple[int, str]:
    old = Path.cwd()
    os.chdir(work)
    try:
        result = CliRunner().invoke(main, argv)
    finally:
        os.chdir(old)
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("target", "message", "exit_code"),
    [
        ("", "an empty path is not a file name", 2),
        (" ", "an empty path is not a file name", 2),
        ("fifo", "not a regular file", 2),
        ("sock", "not a regular file", 2),
        ("/dev/null", "not a regular file", 2),
        ("folder", "is a directory", 2),
        ("existing.json", "already exists; add --force", 2),
        ("condapipe.toml", "refusing to write over a config file", 2),
        ("pyproject.toml", "refusing to write over a config file", 2),
        ("missing/plan.json", "the folder missing does not exist", 2),
        # the OS says so only when writing: the errno line every destination gets (exit 3)
        ("/dev/null/plan.json", "a part of the path is a file, not a folder", 3),
    ],
)
def test_plan_o_refuses_what_it_must_not_replace(
    tmp_path: Path, target: str, message: str, exit_code: int
) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "existing.json").write_text("mine\n")
    (tmp_path / "condapipe.toml").write_text("# my config\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        code, err = _run(tmp_path, [*EMIT, "-o", target])
    assert code == exit_code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert (tmp_path / "existing.json").read_text() == "mine\n"
    assert (tmp_path / "condapipe.toml").read_text() == "# my config\n"


def test_force_replaces_a_file_but_never_the_config(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text("old\n")
    (tmp_path / "condapipe.toml").write_text("# my config\n")
    code, err = _run(tmp_path, [*EMIT, "-o", "plan.json", "--force"])
    assert code == 0, err
    assert (tmp_path / "plan.json").read_text().startswith("{")
    code, err = _run(tmp_path, [*EMIT, "-o", "condapipe.toml", "--force"])
    assert code == 2 and (tmp_path / "condapipe.toml").read_text() == "# my config\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["build", "magma", "--cuda", "12.4", "--dry-run", "--compile-cache", "redis://[::1"],
            "not a valid URL",
        ),
        (
            ["build", "magma", "--cuda", "12.4", "--dry-run", "--compile-cache", "redis://h:99999"],
            "not a valid URL",
        ),
        (
            ["upload", "--channel", "o", "--site-url", "http://" + "a" * 64 + ".org", "x.conda"],
            "host name is not valid",
        ),
        (["upload", "--channel", "o", "--site-url", "http://[::1", "x.conda"], "not a valid URL"),
        (
            ["build", "magma", "--cuda", "12.4", "--version", "1" * 5000, "--dry-run"],
            "invalid version (5000 characters",
        ),
        (["plan", "pytorch", "--version", "1" * 5000], "unknown pytorch version '111"),
        (["upload", "--channel", "../admin", "--dry-run", "x.conda"], "not an anaconda.org owner name"),
        (["upload", "--channel", "o", "--label", "$(x)", "--dry-run", "x.conda"], "not a channel label"),
    ],
)
def test_values_that_were_internal_errors_are_one_line_usage_errors(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    (tmp_path / "x.conda").write_bytes(b"")
    code, err = _run(tmp_path, argv)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and len(lines[0]) < 1000, lines
    assert "internal error" not in err and "Errno" not in err


def test_a_work_dir_that_is_not_a_folder_is_one_line_with_the_fix(tmp_path: Path) -> None:
    archive = tmp_path / "src.tar.gz"
    import tarfile

    with tarfile.open(archive, "w:gz"):
        pass
    code, err = _run(
        tmp_path, ["build", "magma", "--cuda", "12.4", "--source", str(archive), "--work-dir", "/dev/null"]
    )
    assert code == 3 and "Errno" not in err
    assert err.strip().splitlines()[-1].endswith("(fix: choose a --work-dir you can write to)")


def test_an_upload_whose_work_dir_cannot_hold_its_log_says_so_in_one_line(tmp_path: Path) -> None:
    from fuzz import archives

    package = archives.build("clean", ".conda", tmp_path / "pkgs", tmp_path / "escape")
    (tmp_path / "tok").write_text("tok-123\n")
    (tmp_path / "tok").chmod(0o600)
    argv = ["upload", "--channel", "o", "--token-file", "tok", "--site-url", "http://127.0.0.1:9"]
    code, err = _run(tmp_path, [*argv, "--work-dir", "/dev/null", "--no-verify", str(package)])
    assert code == 3 and "Errno" not in err
    assert err.strip().splitlines()[-1] == (
        "error: cannot write the upload log under /dev/null/logs: Not a directory "
        "(fix: choose a --work-dir you can write to)"
    )

"""A newcomer's whole journey without a dead end (issue 37): the default combinations build or name
the command that does, every choice is one "chose X: because Y" line, a dry run exits as the build
would, and each piece of advice is true on the machine that prints it.

Everything runs the real CLI in a fresh project folder; the machine facts (no conda channel, no
network, this machine's nvcc and apt) are this machine's.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from condapipe.cli.examples import EXAMPLES
from condapipe.cli.main import COMMAND_MODULES, main
from condapipe.doctor.checks import _older_gcc_fix
from condapipe.doctor.machine import Machine
from condapipe.plan.report import install_hint, print_summary


@pytest.fixture(autouse=True)
def fresh_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def chose(stderr: str) -> dict[str, str]:
    """The "chose X V: why" lines, by what was chosen."""
    out = {}
    for line in stderr.splitlines():
        if line.startswith("chose "):
            head, _, _ = line.partition(":")
            words = head.split()
            out[" ".join(words[1:-1])] = words[-1]
    return out


# ---------------------------------------------------------------- 1. defaults that build


def test_build_pytorch_with_torchvision_picks_a_paired_release_and_says_each_choice() -> None:
    result = cli("build", "pytorch", "--cuda", "12.4", "--with", "torchvision", "--dry-run", "--json")
    assert result.exit_code in (0, 3), result.stderr  # never 2: the default combination is valid
    got = chose(result.stderr)
    assert got["pytorch"] == "2.6.0" and got["torchvision"] == "0.21.0"
    assert {"python", "arch", "cudnn"} <= set(got)
    assert "that a torchvision release pairs with" in result.stderr
    steps = [s["id"] for s in json.loads(result.stdout)["steps"]]
    assert any(s.startswith("build:torchvision-0.21.0-") for s in steps)


def test_build_pytorch_with_torchvision_as_typed_builds_or_names_the_command() -> None:
    result = cli("build", "pytorch", "--with", "torchvision", "--dry-run", "--json")
    if shutil.which("nvcc") is None:  # no CUDA to infer: the exact command to run next
        assert result.exit_code == 2 and "run: condapipe build pytorch --cuda " in result.stderr
        return
    assert result.exit_code in (0, 3), result.stderr
    got = chose(result.stderr)
    assert "torchvision" in got and "pytorch" in got


def test_build_torchvision_without_version_chooses_the_pair() -> None:
    result = cli("build", "torchvision", "--cuda", "cpu", "--dry-run", "--json")
    assert result.exit_code in (0, 3), result.stderr
    got = chose(result.stderr)
    assert got["torchvision"] == "0.26.0"
    assert "the release paired with pytorch 2.11.0" in result.stderr
    assert any(s["id"].startswith("build:torchvision-0.26.0-") for s in json.loads(result.stdout)["steps"])


@pytest.mark.parametrize(
    "argv",
    [
        # the seeds' commands as the README types them
        "build pytorch --version 2.4.1 --python 3.8 --cuda 12.8 --arch 12.0 --with torchvision",
        "build torchvision --version 0.21.0 --cuda cpu --python 3.11",
        "build pytorch --version 1.8.0 --cuda 11.0 --python 3.8",
        "build pytorch --cuda 11.0",
        "build pytorch --jetson orin",
        "build magma --cuda 12.8",
        "build libtorch --version 2.4.1 --cuda 12.4",
    ],
)
def test_each_seed_command_is_valid_and_stops_only_on_the_machine(argv: str) -> None:
    result = cli(*argv.split(), "--dry-run", "--json")
    assert result.exit_code in (0, 3), result.stderr  # 3: this machine lacks something, with the fix
    assert "error: " not in result.stderr or "fix:" in result.stderr or "(fix" in result.stderr


def test_the_arch_list_is_a_choice_line_a_40_series_user_can_read() -> None:
    result = cli("config", "show", "pytorch", "--cuda", "12.8", "--python", "3.11")
    assert result.exit_code == 0
    got = chose(result.stderr)
    assert "8.9" not in got["arch"].split(";") and "8.6" in got["arch"].split(";")
    line = next(x for x in result.stderr.splitlines() if x.startswith("chose arch "))
    assert "pytorch's default list for CUDA 12.8; " in line and " 8.9 run 8.6's code" in line
    assert got["cudnn"] == "9.7.1"


def test_a_jetson_profile_is_one_choice_line() -> None:
    result = cli("config", "show", "pytorch", "--jetson", "tx2")
    assert result.exit_code == 0
    assert (
        "chose Jetson tx2 JetPack 4.6: the board's newest JetPack (CUDA 10.2, cuDNN 8.2.1, Python 3.6, "
        "pytorch 1.10.0)" in result.stderr
    )
    assert chose(result.stderr)["arch"] == "6.2"


# ---------------------------------------------------------------- 4. advice true on this machine


def test_python_2_is_not_told_to_write_x_y() -> None:
    result = cli("build", "pytorch", "--python", "2.7", "--dry-run")
    assert result.exit_code == 2
    assert "X.Y" not in result.stderr and "Python 3 only" in result.stderr


def test_jetson_on_x86_is_neither_told_to_install_cuda_nor_that_force_helps() -> None:
    env = {"CONDAPIPE_MACHINE_ARCH": "x86_64"}
    for extra in ((), ("--force",)):
        result = cli("build", "pytorch", "--jetson", "orin", "--dry-run", *extra, env=env)
        assert result.exit_code == 3
        assert "cannot build linux-aarch64 packages" in result.stderr
        assert "--force builds anyway" not in result.stderr
        assert "install the CUDA" not in result.stderr and "cuDNN found" not in result.stderr


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="needs apt-cache (Debian/Ubuntu)")
def test_gcc_advice_names_apt_packages_only_where_apt_has_them() -> None:
    machine = Machine.from_environ(Path(".condapipe"), os.environ)
    missing = _older_gcc_fix(machine, 3, 12)  # gcc-3 is in no current apt source
    assert "apt-get install" not in missing and "apt sources have no gcc-3" in missing
    assert "--cuda " in missing and "conda-forge" in missing
    for n in range(15, 8, -1):  # one gcc-N this machine's apt does offer
        if os.popen(f"apt-cache show --no-all-versions gcc-{n} 2>/dev/null").read().strip():
            assert _older_gcc_fix(machine, n, 99).startswith(f"sudo apt-get install gcc-{n} g++-{n}")
            break


@pytest.mark.parametrize("folder", ["/proc/condapipe-out", "/sys/condapipe-out"])
def test_an_output_dir_on_a_kernel_file_system_stops_the_dry_run_and_the_build(folder: str) -> None:
    for extra in (("--dry-run",), ("--force",)):
        result = cli("build", "cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--output-dir", folder, *extra)
        assert result.exit_code == 3, result.stderr
        assert "a kernel file system" in result.stderr and "--force builds anyway" not in result.stderr


def test_a_source_that_cannot_be_downloaded_stops_the_dry_run_as_the_build() -> None:
    common = ["build", "magma", "--cuda", "13.0", "--arch", "9.0", "--build-tools", "wheels", "--offline"]
    dry = cli(*common, "--dry-run")
    real = cli(*common)
    for result in (dry, real):
        assert result.exit_code == 3, result.stderr
        assert "cannot be downloaded: http://icl.utk.edu/" in result.stderr
        assert "sha256 6cd83808" in result.stderr and "--source magma-2.6.1.tar.gz" in result.stderr
    assert not Path("channel").exists() or not any(Path("channel").rglob("*.conda"))


def test_a_build_stopped_by_doctor_also_names_the_source_that_cannot_be_downloaded() -> None:
    """Every preflight problem is said at once (a low disk must not hide an unreachable source)."""
    common = ["build", "magma", "--cuda", "13.0", "--arch", "9.0", "--build-tools", "wheels", "--offline"]
    for extra in (("--dry-run",), ()):
        result = cli(*common, "--output-dir", "/proc/condapipe-out", *extra)
        assert result.exit_code == 3, result.stderr
        assert "a kernel file system" in result.stderr
        assert "cannot be downloaded: http://icl.utk.edu/" in result.stderr


def test_the_source_probe_tells_a_served_file_from_a_refused_or_missing_one(tmp_path: Path) -> None:
    import http.server
    import threading
    from functools import partial

    from condapipe.plan.source_probe import _unreachable

    (tmp_path / "magma-2.6.1.tar.gz").write_bytes(b"x" * 100)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert _unreachable(f"{base}/magma-2.6.1.tar.gz", 5) is None
        assert _unreachable(f"{base}/gone.tar.gz", 5) == "HTTP 404 File not found"
    finally:
        server.shutdown()
    assert "refused" in str(_unreachable("http://127.0.0.1:9/magma-2.6.1.tar.gz", 5)).lower()


def test_upload_dry_run_shows_labels_and_warns_without_a_token(tmp_path: Path) -> None:
    from fake_anaconda import make_package

    make_package(tmp_path / "channel" / "linux-64", "tiny", "1.0")
    env = {"ANACONDA_API_TOKEN": "", "BINSTAR_API_TOKEN": "", "HOME": str(tmp_path)}
    result = cli("upload", "--channel", "myorg", "--label", "dev", "--label", "main", "--dry-run", env=env)
    assert result.exit_code == 0, result.stderr
    assert "labels" in result.stdout and "dev, main" in result.stdout
    assert "warning: no anaconda.org token is set" in result.stderr


# ---------------------------------------------------------------- help texts


def _commands() -> list[tuple[str, click.Command]]:
    out = []
    for name in COMMAND_MODULES:
        cmd = main.get_command(click.Context(main), name)
        assert cmd is not None
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in cmd.commands.items()]
    return out


@pytest.mark.parametrize("name", [n for n, _ in _commands()])
def test_every_help_shows_a_real_example_and_where_debug_goes(name: str) -> None:
    result = cli(*name.split(), "--help")
    assert result.exit_code == 0
    assert f"Example:\n    {EXAMPLES[name]}" in result.stdout
    assert "--debug" in result.stdout
    # the example parses against the command's own options (no flag it does not take)
    words = EXAMPLES[name].split()[1:]
    parent = main.make_context("condapipe", list(words))
    cmd: click.Command = main
    while isinstance(cmd, click.Group):
        words = [*getattr(parent, "_protected_args", ()), *parent.args]
        sub = cmd.get_command(parent, words[0])
        assert sub is not None, words[0]
        parent, cmd = sub.make_context(words[0], words[1:], parent=parent), sub


def test_patches_list_takes_package_and_version_like_every_other_command() -> None:
    new = cli("patches", "list", "pytorch", "--version", "2.4.1", "--json")
    old = cli("patches", "list", "--for", "pytorch==2.4.1", "--json")
    assert new.exit_code == old.exit_code == 0
    assert json.loads(new.stdout) == json.loads(old.stdout)
    both = cli("patches", "list", "pytorch", "--for", "pytorch==2.4.1")
    assert both.exit_code == 2 and "not both" in both.stderr


# ---------------------------------------------------------------- the end of the build


def _report(install: str, check: str) -> dict:
    return {
        "ok": True,
        "seconds": 1.0,
        "steps": [{"id": "build:x", "status": "ran", "seconds": 1.0, "error": None, "reason": "new"}],
        "package_details": [],
        "prerequisites_from_channels": [],
        "channel": "/c",
        "install": install,
        "check": check,
    }


def test_the_summary_prints_the_steps_once_and_names_condapipe_env_without_conda(tmp_path: Path) -> None:
    hint = install_hint(tmp_path / "channel", ["pytorch", "torchvision"], conda=False)
    assert hint == "condapipe env pytorch torchvision -p ./env"
    conda_hint = install_hint(tmp_path / "out", ["pytorch"], conda=True)
    assert conda_hint.startswith("conda install -c file://")
    out = io.StringIO()
    print_summary(_report(hint, hint), Console(file=out, width=200), steps_shown=True)
    assert "build:x" not in out.getvalue()  # the live table already showed it on this terminal
    assert "install: condapipe env pytorch torchvision -p ./env" in out.getvalue()
    out = io.StringIO()
    print_summary(_report(conda_hint, "condapipe env pytorch -p ./env"), Console(file=out, width=200))
    assert out.getvalue().count("build:x") == 1
    assert "install and check (no conda needed): condapipe env pytorch -p ./env" in out.getvalue()


def test_missing_build_tools_are_not_told_to_use_the_flag_already_given() -> None:
    from condapipe.plan.resolve import _fix_for

    assert _fix_for("ninja").startswith("--build-tools wheels")
    assert "--build-tools wheels" not in _fix_for("ninja", tools_in_use=True)


def test_build_tools_wheels_without_the_ninja_wheel_stops_the_dry_run_as_the_build(tmp_path: Path) -> None:
    """A Python environment holding everything but ninja (links to this venv's site-packages minus
    ninja's files): the dry run stops with the fix the real run gives, never "use --build-tools wheels"."""
    import subprocess
    import sys
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    partial = tmp_path / "site"
    partial.mkdir()
    for entry in site.iterdir():
        if not entry.name.lower().startswith("ninja"):
            (partial / entry.name).symlink_to(entry)
    # -S: not this venv's site-packages; addsitedir: the partial one, its .pth files (the editable
    # install of condapipe) included
    code = f"import site; site.addsitedir({str(partial)!r}); from condapipe.cli.main import main; main()"
    args = ["build", "cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--build-tools", "wheels", "--offline"]
    for extra in (["--dry-run"], []):
        proc = subprocess.run(
            [sys.executable, "-S", "-c", code, *args, *extra], cwd=tmp_path, capture_output=True, text=True
        )
        assert proc.returncode == 3, proc.stderr[-2000:]
        assert "the ninja wheel is not installed in condapipe's Python environment" in proc.stderr
        assert "python3 -m pip install ninja" in proc.stderr


def test_the_env_line_searches_what_the_build_searched(tmp_path: Path) -> None:
    from condapipe.plan.report import env_hint

    chan = tmp_path / "channel"
    assert env_hint(chan, ["pytorch"], ("conda-forge",)) == "condapipe env pytorch -p ./env"
    assert env_hint(chan, ["pytorch"], ("/h/host-channel", "/w/tool-channel")) == (
        "condapipe env pytorch -p ./env -c /h/host-channel"
    )
    assert env_hint(chan, ["x"], ("/w/tool-channel",)) == "condapipe env x -p ./env --offline"
    assert env_hint(tmp_path / "out", ["x"]) == f"condapipe env x -p ./env --output-dir {tmp_path / 'out'}"

"""`--build-tools wheels`: cmake/ninja wheels become a local conda channel an offline build solves from.

The wheels here are made by the test in the layouts PyPI's wheels use (`cmake/data/bin/cmake`,
`ninja-X.data/scripts/ninja`) around the machine's real ninja binary; the channel is indexed and
installed with py-rattler, and rattler-build takes `ninja` from it with no other channel.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from e2e_helpers import condapipe, install

from condapipe.cli.main import main
from condapipe.errors import EnvironmentProblem, UsageError
from condapipe.inputchannels.tool_channel import from_installed, from_wheel, make_tool_channel

NINJA = shutil.which("ninja")


def _has_dist(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


needs_ninja = pytest.mark.skipif(NINJA is None, reason="ninja not installed")


def _wheel(path: Path, files: dict[str, tuple[bytes, int]]) -> Path:
    """A wheel (zip) with the given members: name -> (content, unix mode)."""
    with zipfile.ZipFile(path, "w") as whl:
        for name, (data, mode) in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            whl.writestr(info, data)
    return path


def _ninja_wheel(tmp_path: Path) -> Path:
    assert NINJA is not None
    return _wheel(
        tmp_path / "ninja-1.11.1-py3-none-manylinux2014_x86_64.whl",
        {
            "ninja/__init__.py": (b"", 0o644),
            "ninja-1.11.1.data/scripts/ninja": (Path(NINJA).read_bytes(), 0o755),
            "ninja-1.11.1.dist-info/METADATA": (b"Name: ninja\nVersion: 1.11.1\n", 0o644),
        },
    )


@needs_ninja
def test_a_ninja_wheel_becomes_an_installable_conda_package(tmp_path: Path) -> None:
    tool = from_wheel(_ninja_wheel(tmp_path), "ninja")
    assert (tool.name, tool.version, [f.path for f in tool.files]) == ("ninja", "1.11.1", ["bin/ninja"])
    (pkg,) = make_tool_channel(tmp_path / "tools", [tool])
    assert pkg.name == "ninja-1.11.1-pypi_wheel_0.conda" and pkg.parent.name == "linux-64"
    assert oct(pkg.stat().st_mode & 0o777) == "0o644"
    assert install(tmp_path / "tools", ["ninja"], tmp_path / "prefix", tmp_path / "cache") == ["ninja"]
    installed = subprocess.run(
        [tmp_path / "prefix" / "bin" / "ninja", "--version"], capture_output=True, text=True
    )
    system = subprocess.run([NINJA, "--version"], capture_output=True, text=True)
    assert installed.returncode == 0 and installed.stdout == system.stdout


@needs_ninja
def test_a_package_already_at_the_tool_path_is_used_only_if_its_content_hash_matches(tmp_path: Path) -> None:
    """The tool package is the same bytes every time; what else sits at its name is replaced."""
    tool = from_wheel(_ninja_wheel(tmp_path), "ninja")
    (pkg,) = make_tool_channel(tmp_path / "tools", [tool])
    good = pkg.read_bytes()
    inode = pkg.stat().st_ino
    assert make_tool_channel(tmp_path / "tools", [tool]) == [pkg]
    assert pkg.stat().st_ino == inode  # identical: kept, not rewritten
    pkg.write_bytes(good[:-10] + b"x" * 10)  # a hostile package under the same name
    make_tool_channel(tmp_path / "tools", [tool])
    assert pkg.read_bytes() == good
    assert install(tmp_path / "tools", ["ninja"], tmp_path / "prefix", tmp_path / "cache") == ["ninja"]
    pkg.unlink()
    pkg.symlink_to(tmp_path / "elsewhere.conda")
    with pytest.raises(UsageError, match="not a regular file"):
        make_tool_channel(tmp_path / "tools", [tool])


def test_an_unknown_package_is_refused_before_the_tool_channel_is_made(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["build", "no-such-family", "--build-tools", "wheels", "--work-dir", str(tmp_path / "w")]
    )
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "w" / "tool-channel").exists()


def test_the_cmake_data_tree_wins_over_its_python_console_script(tmp_path: Path) -> None:
    elf = Path("/usr/bin/true").read_bytes()
    wheel = _wheel(
        tmp_path / "cmake-4.1.0-py3-none-manylinux2014_x86_64.whl",
        {
            "cmake/__init__.py": (b"", 0o644),
            "cmake/data/bin/cmake": (elf, 0o755),
            "cmake/data/share/cmake-4.1/Modules/FindCUDA.cmake": (b"# module\n", 0o644),
            "cmake-4.1.0.data/scripts/cmake": (b"#!python\nfrom cmake import cmake\n", 0o755),
            "../escape": (b"no", 0o644),
        },
    )
    tool = from_wheel(wheel, "cmake")
    files = {f.path: f for f in tool.files}
    assert sorted(files) == ["bin/cmake", "share/cmake-4.1/Modules/FindCUDA.cmake"]
    assert files["bin/cmake"].data == elf and files["bin/cmake"].executable
    assert not files["share/cmake-4.1/Modules/FindCUDA.cmake"].executable


def test_files_that_are_not_tool_wheels_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a wheel file"):
        from_wheel(tmp_path / "missing.whl", "cmake")
    junk = tmp_path / "junk-1.0-py3-none-any.whl"
    junk.write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="not a readable wheel"):
        from_wheel(junk, "cmake")
    empty = _wheel(tmp_path / "cmake-1.0-py3-none-any.whl", {"cmake/__init__.py": (b"", 0o644)})
    with pytest.raises(UsageError, match="no cmake executable"):
        from_wheel(empty, "cmake")


def test_a_tool_that_pip_did_not_install_says_how_to_get_it() -> None:
    with pytest.raises(EnvironmentProblem) as info:
        from_installed("condapipe-no-such-tool")
    assert "python3 -m pip install condapipe-no-such-tool" in info.value.fix


@pytest.mark.skipif(_has_dist("cmake") or _has_dist("ninja"), reason="cmake/ninja wheels are installed here")
def test_cli_without_the_wheels_is_an_environment_problem(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["build", "magma", "--cuda", "13.0", "--build-tools", "wheels", "--work-dir", str(tmp_path)]
    )
    assert result.exit_code == 3, result.output
    assert "pip install" in result.output and "Traceback" not in result.output


@needs_ninja
def test_an_offline_rattler_build_takes_ninja_from_the_tool_channel(tmp_path: Path) -> None:
    make_tool_channel(tmp_path / "tools", [from_wheel(_ninja_wheel(tmp_path), "ninja")])
    recipe = tmp_path / "uses-ninja"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(
        "package: {name: uses-ninja, version: '1.0'}\n"
        "requirements:\n  build: [ninja]\n"
        "build:\n  script:\n"
        '    - test "$(command -v ninja)" = "$BUILD_PREFIX/bin/ninja"\n'
        '    - mkdir -p "$PREFIX/share" && ninja --version > "$PREFIX/share/ninja-version.txt"\n'
    )
    code, _out, err = condapipe(
        "build", str(recipe), "--engine", "rattler-build", "--override-channels",
        "-c", str(tmp_path / "tools"), "--output-dir", str(tmp_path / "channel"),
        "--work-dir", str(tmp_path / "work"), cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert install(tmp_path / "channel", ["uses-ninja"], tmp_path / "prefix", tmp_path / "cache") == [
        "uses-ninja"
    ]
    version = (tmp_path / "prefix" / "share" / "ninja-version.txt").read_text()
    assert version == subprocess.run([NINJA, "--version"], capture_output=True, text=True).stdout


@needs_ninja
def test_ninja_installed_with_pip_target_is_found_where_its_record_points_outside(tmp_path: Path) -> None:
    """`pip install --target DIR` records the script as ../../bin/ninja relative to DIR; Python's
    `Distribution.files` drops that entry wherever DIR/../../bin/ninja does not exist (it did on the
    GPU machine: 'no ninja executable'), so condapipe reads RECORD itself and finds DIR/bin/ninja.
    The drop is Python 3.12's (importlib.metadata's skip of missing files): on 3.11 the old code
    passed too; the probe runs in this interpreter, so the test bites where condapipe runs on 3.12+."""
    assert NINJA is not None
    data = Path(NINJA).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    wheel = _wheel(
        tmp_path / "ninja-1.13.2-py3-none-manylinux2014_x86_64.whl",
        {
            "ninja/__init__.py": (b"", 0o644),
            "ninja-1.13.2.data/scripts/ninja": (data, 0o755),
            "ninja-1.13.2.dist-info/METADATA": (
                b"Metadata-Version: 2.1\nName: ninja\nVersion: 1.13.2\n",
                0o644,
            ),
            "ninja-1.13.2.dist-info/WHEEL": (
                b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                b"Tag: py3-none-manylinux2014_x86_64\n",
                0o644,
            ),
            "ninja-1.13.2.dist-info/RECORD": (
                f"ninja-1.13.2.data/scripts/ninja,sha256={digest},{len(data)}\n".encode(),
                0o644,
            ),
        },
    )
    site = tmp_path / "deep" / "er" / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
         "--target", str(site), str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    assert (site / "bin" / "ninja").is_file() and not (site / ".." / ".." / "bin" / "ninja").exists()
    probe = (
        "import sys; from condapipe.inputchannels.tool_channel import from_installed; "
        "t = from_installed('ninja'); print(t.version, [f.path for f in t.files])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path[1:]])}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1) == ["1.13.2", "['bin/ninja']\n"]

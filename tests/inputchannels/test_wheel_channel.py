"""`condapipe wheels`: PyPI wheels and this CPython as a local channel a host environment solves from.

The wheels are written here as the wheel spec lays them out, installed with py-rattler into a fresh
prefix and run with the prefix's own python.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from e2e_helpers import condapipe, install

from condapipe.inputchannels.wheel_channel import conda_dependency, running_python
from condapipe.package.io import read_index


def _wheel(out: Path, name: str, version: str, files: dict[str, str], meta: str = "") -> Path:
    """A wheel file as the wheel spec lays it out (what `pip wheel` writes): modules at the root,
    `.data/<scheme>/` trees, and the `.dist-info` METADATA, WHEEL, entry_points.txt and RECORD."""
    info = f"{name}-{version}.dist-info"
    members = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    members[f"{info}/RECORD"] = "".join(f"{m},,\n" for m in members) + f"{info}/RECORD,,\n"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for member, text in members.items():
            z.writestr(member, text)
    return path


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    requires = (
        "Requires-Dist: typing-extensions>=4.0\n"
        "Requires-Dist: colorama; sys_platform == 'win32'\n"
        "Requires-Dist: rich; extra == 'fancy'\n"
        "Provides-Extra: fancy\n"
    )
    files = {
        "demo_tool/__init__.py": "import typing_extensions\nVALUE = 42\n",
        "demo_tool/cli.py": "def main():\n    print('demo-tool says', __import__('demo_tool').VALUE)\n",
        "Demo_Tool-1.2.3.data/data/share/demo/shared.txt": "shared data\n",
        "Demo_Tool-1.2.3.dist-info/entry_points.txt": "[console_scripts]\ndemo-tool = demo_tool.cli:main\n",
    }
    _wheel(out, "Demo_Tool", "1.2.3", files, requires)
    _wheel(out, "typing_extensions", "4.12.2", {"typing_extensions.py": "OK = True\n"})
    return out


def test_wheels_install_as_conda_packages_into_an_isolated_venv_python(wheels: Path, tmp_path: Path) -> None:
    code, out, err = condapipe("wheels", str(wheels), "--to", str(tmp_path / "ch"), "--json", cwd=tmp_path)
    assert code == 0, err
    assert sorted(json.loads(out)["packages"])[0].startswith("demo-tool-1.2.3-cp")
    prefix = tmp_path / "env"
    names = install(tmp_path / "ch", ["python", "demo-tool"], prefix, tmp_path / "cache")
    assert names == ["demo-tool", "python", "typing_extensions"]  # dependency mapped to the conda name
    py = prefix / "bin" / "python"
    probe = "import sys, demo_tool as d, sysconfig as s; print(sys.prefix, d.__file__, s.get_path('purelib'))"
    run = subprocess.run([py, "-c", probe], capture_output=True, text=True, check=True)
    prefix_seen, module, purelib = run.stdout.split()
    assert Path(prefix_seen) == prefix and Path(module).is_relative_to(
        prefix / running_python().site_packages
    )
    assert Path(purelib) == prefix / running_python().site_packages  # pip/setuptools install here
    # The console script is a launcher whose shebang the installer pointed at this prefix.
    script = subprocess.run([prefix / "bin" / "demo-tool"], capture_output=True, text=True, check=True)
    assert script.stdout.strip() == "demo-tool says 42"
    assert (prefix / "share/demo/shared.txt").read_text() == "shared data\n"  # .data/data -> prefix
    # Nothing installed beside condapipe's own interpreter leaks into the environment.
    leak = subprocess.run([py, "-c", "import click"], capture_output=True, text=True)
    assert leak.returncode != 0 and "No module named 'click'" in leak.stderr


def test_requirements_follow_markers_and_extras_for_the_target_python() -> None:
    target = running_python()
    assert conda_dependency("typing-extensions>=4.0", target) == "typing_extensions >=4.0"
    assert conda_dependency("colorama; sys_platform == 'win32'", target) is None
    assert conda_dependency("rich; extra == 'fancy'", target) is None
    assert conda_dependency("torch==2.6.0+cpu", target) == "pytorch ==2.6.0"
    assert conda_dependency("tbb==2021.*", target) == "tbb ==2021.*"
    assert conda_dependency("old; python_version < '3.0'", target) is None


def test_the_package_records_what_it_depends_on(wheels: Path, tmp_path: Path) -> None:
    code, _, err = condapipe("wheels", str(wheels), "--to", str(tmp_path / "ch"), "--no-python", cwd=tmp_path)
    assert code == 0, err
    demo = next((tmp_path / "ch/linux-64").glob("demo-tool-*.conda"))
    index = read_index(demo)
    assert index["depends"] == [f"python {running_python().short}.*", "typing_extensions >=4.0"]
    assert not list((tmp_path / "ch/linux-64").glob("python-*.conda"))


def test_a_wheel_for_another_python_is_refused_naming_both(tmp_path: Path) -> None:
    other = "cp27" if running_python().tag != "cp27" else "cp36"
    bad = tmp_path / f"thing-1.0-{other}-{other}-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("thing-1.0.dist-info/METADATA", "Name: thing\nVersion: 1.0\n")
    code, _, err = condapipe("wheels", str(bad), "--to", str(tmp_path / "ch"), cwd=tmp_path)
    assert code == 2 and f"built for {other}, not for CPython {running_python().short}" in err
    assert not (tmp_path / "ch").exists()  # checked before anything is written


def test_a_stable_abi_wheel_of_an_older_cpython_is_taken_a_newer_one_refused(tmp_path: Path) -> None:
    # psutil ships cp36-abi3 wheels: the stable ABI runs on CPython 3.6 and every newer one (pip takes it).
    minor = int(running_python().short.split(".")[1])
    older = tmp_path / "older"
    older.mkdir()
    ok = older / "stable-1.0-cp36-abi3-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(ok, "w") as z:
        z.writestr("stable-1.0.dist-info/METADATA", "Name: stable\nVersion: 1.0\n")
        z.writestr("stable/__init__.py", "")
    code, _, err = condapipe("wheels", str(ok), "--to", str(tmp_path / "ch"), "--no-python", cwd=tmp_path)
    assert code == 0, err
    assert list((tmp_path / "ch/linux-64").glob("stable-1.0-*.conda"))
    newer = tmp_path / f"future-1.0-cp3{minor + 1}-abi3-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(newer, "w") as z:
        z.writestr("future-1.0.dist-info/METADATA", "Name: future\nVersion: 1.0\n")
    code, _, err = condapipe("wheels", str(newer), "--to", str(tmp_path / "ch2"), cwd=tmp_path)
    assert code == 2 and f"built for cp3{minor + 1}" in err


@pytest.mark.parametrize("member", ["../escape.py", "/abs.py", "pkg/../../x.py"])
def test_a_wheel_member_outside_its_tree_is_refused(tmp_path: Path, member: str) -> None:
    bad = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("evil-1.0.dist-info/METADATA", "Name: evil\nVersion: 1.0\n")
        z.writestr(member, "print('owned')\n")
    code, _, err = condapipe("wheels", str(bad), "--to", str(tmp_path / "ch"), cwd=tmp_path)
    assert code == 2 and "not a plain relative path" in err
    assert not (tmp_path / "escape.py").exists() and not (tmp_path / "ch").exists()


def test_not_a_wheel_is_a_one_line_usage_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk-1.0-py3-none-any.whl"
    junk.write_bytes(b"not a zip")
    code, _, err = condapipe("wheels", str(junk), "--to", str(tmp_path / "ch"), cwd=tmp_path)
    assert code == 2 and "not a readable wheel" in err and len(err.strip().splitlines()) == 1


def test_mkl_devel_gets_the_library_links_its_conda_package_has(tmp_path: Path) -> None:
    """Wheels hold no symlinks; conda's mkl-devel is the libmkl_*.so -> .so.2 links FindMKL links."""
    wheels = tmp_path / "w"
    lib = "mkl-2023.1.0.data/data/lib"
    _wheel(wheels, "mkl", "2023.1.0", {f"{lib}/libmkl_core.so.2": "elf", f"{lib}/libmkl_rt.so.2": "elf"})
    _wheel(wheels, "mkl_devel", "2023.1.0", {}, "Requires-Dist: mkl (==2023.1.0)\n")
    code, _, err = condapipe("wheels", str(wheels), "--to", str(tmp_path / "ch"), cwd=tmp_path)
    assert code == 0, err
    prefix = tmp_path / "env"
    assert install(tmp_path / "ch", ["python", "mkl-devel"], prefix, tmp_path / "cache") == [
        "mkl",
        "mkl-devel",
        "python",
    ]
    for name in ("libmkl_core", "libmkl_rt"):
        link = prefix / "lib" / f"{name}.so"
        assert link.is_symlink() and link.readlink() == Path(f"{name}.so.2") and link.read_text() == "elf"


def test_a_devel_wheel_without_its_base_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    _wheel(wheels, "mkl_devel", "2023.1.0", {}, "Requires-Dist: mkl (==2023.1.0)\n")
    code, _, err = condapipe("wheels", str(wheels), "--to", str(tmp_path / "ch"), cwd=tmp_path)
    assert code == 2 and "mkl-devel needs the mkl 2023.1.0 wheel beside it" in err
    assert not (tmp_path / "ch").exists()


def test_wheel_packages_ship_their_bytecode_so_importing_them_writes_nothing(
    wheels: Path, tmp_path: Path
) -> None:
    """pip compiles what it installs; a conda package ships its .pyc files. Without them the first
    import writes __pycache__ into the prefix, and a recipe whose build imports the package finds
    files it never made inside its own package."""
    code, _out, err = condapipe("wheels", str(wheels), "--to", str(tmp_path / "ch"), cwd=tmp_path)
    assert code == 0, err
    prefix = tmp_path / "env"
    install(tmp_path / "ch", ["python", "demo-tool"], prefix, tmp_path / "cache")
    site = prefix / running_python().site_packages
    shipped = sorted(str(p.relative_to(site)) for p in site.rglob("*.pyc"))
    assert any(p.startswith("demo_tool/__pycache__/cli.") for p in shipped), shipped
    before = {p: p.stat().st_mtime_ns for p in prefix.rglob("*")}
    subprocess.run([prefix / "bin" / "demo-tool"], capture_output=True, text=True, check=True)
    after = {p: p.stat().st_mtime_ns for p in prefix.rglob("*")}
    assert after == before  # the import used the shipped bytecode: no file added or rewritten

"""A package built with `pip install .` carries no record of the build machine.

pip writes <dist>.dist-info/direct_url.json (PEP 610) for an install from a local folder, naming
that folder: the engine's work dir. The first real torchvision build through the plan was refused by
verify for exactly that file. The rendered build.sh removes it after pip and marks the install as
conda's (INSTALLER), as conda-build does; this runs the rendered function after a real pip install.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from render_helpers import run_cli


def _rendered(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "recipe"
    result = run_cli("render", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return (out / "build.sh").read_text()


def _function(build_sh: str) -> str:
    found = re.search(r"^condapipe_pip_record\(\) \{\n.*?^\}\n", build_sh, re.M | re.S)
    assert found, "build.sh defines no condapipe_pip_record"
    return found.group(0)


VERSIONS = {"torchvision": "0.21.0", "torch": "2.6.0"}  # the pair the renders below build


def _wheel(folder: Path, name: str) -> Path:
    """A one-module wheel, as a build backend would make it."""
    version = VERSIONS[name]
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}_mod.py": "VALUE = 1\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in {**files, f"{dist}/RECORD": record}.items():
            archive.writestr(path, text)
    return wheel


def _pip_install(tmp_path: Path, name: str) -> Path:
    """pip installs a local file (as `pip install .` does its freshly built wheel) into a prefix;
    returns its site-packages. pip records the file's path in direct_url.json either way."""
    build = tmp_path / f"work-{name}"
    build.mkdir()
    prefix = tmp_path / "prefix"
    subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "install", "-q", "--no-deps", "--no-index",
         "--no-compile", "--prefix", str(prefix), str(_wheel(build, name))],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (site,) = prefix.glob("lib/python*/site-packages")
    return site


@pytest.mark.parametrize(
    ("render_args", "dist"),
    [
        (("torchvision", "--version", "0.21.0", "--python", "3.11", "--cuda", "cpu"), "torchvision"),
        (("pytorch", "--version", "2.6.0", "--python", "3.11", "--cuda", "cpu"), "torch"),
    ],
)
def test_a_pip_built_package_keeps_no_build_path_and_says_conda_installed_it(
    tmp_path: Path, render_args: tuple[str, ...], dist: str
) -> None:
    build_sh = _rendered(tmp_path, *render_args)
    assert f"\ncondapipe_pip_record {dist}\n" in build_sh
    site = _pip_install(tmp_path, dist)
    (info,) = site.glob(f"{dist}-*.dist-info")
    assert str(tmp_path) in (info / "direct_url.json").read_text()  # what pip leaves

    script = _function(build_sh) + f"condapipe_pip_record {dist}\n"
    done = subprocess.run(["bash", "-c", script], env={"SP_DIR": str(site), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0

    assert not (info / "direct_url.json").exists()
    assert (info / "INSTALLER").read_text() == "conda\n"
    record = (info / "RECORD").read_text()
    assert "direct_url.json" not in record
    assert f"{info.name}/INSTALLER,," in record.splitlines()
    left = [p for p in site.rglob("*") if p.is_file() and str(tmp_path).encode() in p.read_bytes()]
    assert left == [], left


def test_another_distribution_in_site_packages_is_left_alone(tmp_path: Path) -> None:
    build_sh = _rendered(tmp_path, "torchvision", "--version", "0.21.0", "--python", "3.11", "--cuda", "cpu")
    site = _pip_install(tmp_path, "torch")  # the host's torch, not what this build installs
    (info,) = site.glob("torch-*.dist-info")
    before = {p.name: p.read_bytes() for p in info.iterdir()}
    script = _function(build_sh) + "condapipe_pip_record torchvision\n"
    subprocess.run(["bash", "-c", script], env={"SP_DIR": str(site), "PATH": "/usr/bin:/bin"}, check=True)
    assert {p.name: p.read_bytes() for p in info.iterdir()} == before

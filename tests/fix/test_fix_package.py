"""`condapipe fix` on real packages: a PyTorch-shaped package built with gcc, packed by
conda-package-handling, fixed, and read back with the reference reader."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conda_package_handling import api as cph
from elfkit import LIB_SRC, gcc_exe, gcc_shared, make_package, readelf_dynamic, sha256, write_metadata

from condapipe.cli.main import main
from condapipe.elf.reader import read_dynamic
from condapipe.fix.fixer import FixOptions, fix_package, fix_package_file, fix_prefix, vendored_name
from condapipe.fix.rpath import rules_for
from condapipe.package.io import read_index
from condapipe.verify.verifier import verify_package

PREFIX = "/home/ci/conda-bld/torch_1700000000/_h_env_placehold_placehold_placehold_placehold_placehold"
SP = "lib/python3.11/site-packages/torch"
C10_SRC = "int c10_value(void) { return 7; }\n"
TORCH_SRC = (
    "int c10_value(void);\nint cupti_value(void);\n"
    "int torch_value(void) { return c10_value() + cupti_value(); }\n"
)
C_EXT_SRC = "int torch_value(void);\nint ext_value(void) { return torch_value() * 2; }\n"
CUPTI_SRC = "int cupti_value(void) { return 5; }\n"


@pytest.fixture(scope="session")
def external(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Libraries outside the package that get vendored (like cuPTI and cuDNN from /usr/local/cuda)."""
    d = tmp_path_factory.mktemp("cuda")
    gcc_shared(d / "libfakecupti.so.12.8.90", CUPTI_SRC, soname="libfakecupti.so.12")
    (d / "libfakecupti.so.12").symlink_to("libfakecupti.so.12.8.90")
    gcc_shared(d / "libcudnn_fake.so.9", LIB_SRC, soname="libcudnn_fake.so.9")
    return d


@pytest.fixture(scope="session")
def torch_tree(tmp_path_factory: pytest.TempPathFactory, external: Path) -> Path:
    """An installed-prefix tree as a build leaves it: absolute build rpaths, RUNPATH, links."""
    root = tmp_path_factory.mktemp("torch-tree") / "prefix"
    lib = root / SP / "lib"
    gcc_shared(lib / "libc10.so", C10_SRC, soname="libc10.so", rpath=f"{PREFIX}/lib", runpath=True)
    gcc_shared(
        lib / "libtorch.so",
        TORCH_SRC,
        soname="libtorch.so",
        libs=("libc10.so", "libfakecupti.so.12"),
        libdirs=(lib, external),
        rpath=f"/usr/local/cuda/lib64:{PREFIX}/lib",
    )
    gcc_shared(
        root / SP / "_C.cpython-311-x86_64-linux-gnu.so",
        C_EXT_SRC,
        libs=("libtorch.so",),
        libdirs=(lib,),
        rpath=f"{PREFIX}/lib",
    )
    gcc_exe(root / "bin" / "torch-tool", "int main(void){return 0;}\n", rpath=f"{PREFIX}/lib:/opt/other")
    (root / SP / "__init__.py").write_text("from . import _C\n")
    os.chmod(root / SP / "__init__.py", 0o644)
    (root / "lib" / "libc10.so").symlink_to("python3.11/site-packages/torch/lib/libc10.so")
    os.link(lib / "libc10.so", lib / "libc10_alias.so")  # a hard-linked ELF: patched once, hashed twice
    (root / "share" / "doc").mkdir(parents=True)
    (root / "share" / "doc" / "LICENSE").write_text("BSD\n")
    os.link(root / "share" / "doc" / "LICENSE", root / "share" / "doc" / "COPYING")
    write_metadata(root, name="pytorch", version="2.5.0", depends=("python >=3.11,<3.12",))
    return root


@pytest.fixture(params=[".conda", ".tar.bz2"])
def torch_pkg(request: pytest.FixtureRequest, torch_tree: Path, tmp_path: Path) -> Path:
    return make_package(torch_tree, tmp_path / "in" / f"pytorch-2.5.0-py311_0{request.param}")


def _extract(pkg: Path, dest: Path) -> Path:
    cph.extract(str(pkg), dest_dir=str(dest))  # the reference reader
    return dest


def _options(external: Path, **kw: object) -> FixOptions:
    vendor = (external / "libfakecupti.so.12", external / "libcudnn_fake.so.9")
    return FixOptions(rules=rules_for("pytorch"), vendor=vendor, **kw)  # type: ignore[arg-type]


def test_fixed_package_has_builder_rpaths_vendored_libs_and_loads_elsewhere(
    torch_pkg: Path, external: Path, tmp_path: Path
) -> None:
    report = fix_package(torch_pkg, _options(external))
    assert report.ok and report.output == str(torch_pkg)
    out = _extract(torch_pkg, tmp_path / "installed")
    assert (
        read_dynamic(out / SP / "_C.cpython-311-x86_64-linux-gnu.so").rpath
        == "$ORIGIN:$ORIGIN/lib:$ORIGIN/../../.."
    )
    for name in ("libtorch.so", "libc10.so"):
        info = read_dynamic(out / SP / "lib" / name)
        assert (info.rpath, info.runpath) == ("$ORIGIN:$ORIGIN/../../../..", None)
    assert read_dynamic(out / "bin" / "torch-tool").rpath == "$ORIGIN/../lib"
    hashed = vendored_name(external / "libfakecupti.so.12.8.90", "libfakecupti.so.12", keep=False)
    assert hashed.startswith("libfakecupti-") and hashed.endswith(".so.12")
    assert (out / SP / "lib" / hashed).is_file()
    assert (out / SP / "lib" / "libcudnn_fake.so.9").is_file()  # cuDNN keeps its name
    assert hashed in read_dynamic(out / SP / "lib" / "libtorch.so").needed
    assert any("/opt/other is outside the prefix" in w for w in report.warnings)
    # relocated to a new place, the extension loads and reaches every library through $ORIGIN
    ext = out / SP / "_C.cpython-311-x86_64-linux-gnu.so"
    code = f"import ctypes; print(ctypes.CDLL({str(ext)!r}).ext_value())"
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.stdout.strip() == "24", proc.stderr


def test_repacked_package_keeps_format_modes_links_and_verifies(
    torch_pkg: Path, external: Path, tmp_path: Path
) -> None:
    fix_package(torch_pkg, _options(external))
    assert read_index(torch_pkg)["name"] == "pytorch"
    out = _extract(torch_pkg, tmp_path / "x")
    assert stat.S_IMODE((out / "bin" / "torch-tool").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / SP / "__init__.py").stat().st_mode) == 0o644
    assert os.readlink(out / "lib" / "libc10.so") == "python3.11/site-packages/torch/lib/libc10.so"
    assert (out / "share/doc/LICENSE").stat().st_ino == (out / "share/doc/COPYING").stat().st_ino
    alias = out / SP / "lib" / "libc10_alias.so"
    assert alias.stat().st_ino == (out / SP / "lib" / "libc10.so").stat().st_ino
    assert read_dynamic(alias).rpath == "$ORIGIN:$ORIGIN/../../../.."
    paths = {e["_path"]: e for e in json.loads((out / "info/paths.json").read_text())["paths"]}
    for rel in ("bin/torch-tool", f"{SP}/lib/libtorch.so"):
        assert paths[rel]["sha256"] == sha256(out / rel)
        assert paths[rel]["size_in_bytes"] == (out / rel).stat().st_size
    files = (out / "info/files").read_text().split()
    assert f"{SP}/lib/libcudnn_fake.so.9" in files and f"{SP}/lib/libcudnn_fake.so.9" in paths
    report = verify_package(torch_pkg)
    assert report.ok, report.errors


def test_fixing_twice_changes_nothing_the_second_time(torch_pkg: Path, external: Path) -> None:
    fix_package(torch_pkg, _options(external))
    before = sha256(torch_pkg)
    second = fix_package(torch_pkg, FixOptions(rules=rules_for("pytorch")))
    assert second.changed == [] and sha256(torch_pkg) == before


def test_dry_run_reports_changes_but_writes_nothing(torch_pkg: Path, external: Path) -> None:
    before = sha256(torch_pkg)
    report = fix_package(torch_pkg, _options(external, dry_run=True))
    assert len(report.changed) == 4 and report.output is None  # the hard-linked alias counts once
    assert sha256(torch_pkg) == before
    assert not list(torch_pkg.parent.glob(".condapipe-fix-*"))


def test_pipeline_entry_point_fixes_in_place_with_the_family_rules(torch_pkg: Path) -> None:
    report = fix_package_file(torch_pkg, family="pytorch", extra_rpaths=("lib/stubs",))
    assert report.ok and {f.patcher for f in report.changed} <= {"in-place", "patchelf"}
    out = _extract(torch_pkg, torch_pkg.parent / "check")
    assert read_dynamic(out / "bin/torch-tool").rpath == "$ORIGIN/../lib:$ORIGIN/../lib/stubs"


def test_each_patcher_can_be_forced_and_gives_the_same_result(torch_tree: Path, tmp_path: Path) -> None:
    results = {}
    for patcher in ("lief", "patchelf"):
        root = tmp_path / patcher
        shutil.copytree(torch_tree, root, symlinks=True)
        fix_prefix(root, FixOptions(rules=rules_for("pytorch"), patcher=patcher), prefixes=(PREFIX,))
        results[patcher] = [readelf_dynamic(root / SP / "lib" / n) for n in ("libtorch.so", "libc10.so")]
    assert results["lief"] == results["patchelf"]


def test_cli_fixes_a_prefix_folder_in_place(tmp_path: Path) -> None:
    root = tmp_path / "prefix"
    gcc_shared(root / "lib" / "libgreet.so", LIB_SRC, rpath=f"{root}/lib:{root}/lib/extra")
    refused = CliRunner().invoke(main, ["fix", str(root), "--json"])  # not a prefix: no conda-meta/
    assert refused.exit_code == 2 and "not a conda prefix" in refused.stderr
    assert read_dynamic(root / "lib" / "libgreet.so").rpath == f"{root}/lib:{root}/lib/extra"
    (root / "conda-meta").mkdir()
    result = CliRunner().invoke(main, ["fix", str(root), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data[0]["changed"] == 1 and data[0]["files"][0]["patcher"] == "in-place"
    assert read_dynamic(root / "lib" / "libgreet.so").rpath == "$ORIGIN:$ORIGIN/extra"


def test_cli_output_dir_leaves_the_original(torch_pkg: Path, external: Path, tmp_path: Path) -> None:
    before = sha256(torch_pkg)
    args = ["fix", str(torch_pkg), "--family", "pytorch", "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert sha256(torch_pkg) == before
    # without vendoring cuPTI the package cannot load: verify says so
    errors = verify_package(tmp_path / "out" / torch_pkg.name).errors
    assert len(errors) == 1 and "needs libfakecupti.so.12" in errors[0]
    vendored = CliRunner().invoke(main, [*args, "--vendor", str(external / "libfakecupti.so.12")])
    assert vendored.exit_code == 0, vendored.output
    assert verify_package(tmp_path / "out" / torch_pkg.name).ok


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fix", "/nonexistent/pkg.conda"], "no such package"),
        (["fix", "/etc/hostname"], "expected a .conda/.tar.bz2 package or a prefix folder"),
        (["fix", ".", "--build-prefix", "relative/path"], "must be an absolute path"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1

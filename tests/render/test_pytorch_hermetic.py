"""A PyTorch package is hermetic: what its CMake would find on the build machine is decided in the
recipe, and its run requirements provide every library it links that the OS does not."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from render_helpers import load_yaml, run_cli, v0_meta, v1_render, variant_combos

from condapipe.facts.families import family_facts
from condapipe.verify.verifier import dependency_libs

# What the real 2.6.0 CPU build linked from outside the package (readelf on the device build): the
# compiler's OpenMP runtime and MKL. numpy is imported, not linked, but its C API is compiled in.
LINKED = ("libgomp.so.1", "libmkl_intel_lp64.so.2", "libmkl_gnu_thread.so.2", "libmkl_core.so.2")


def _meta(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "recipe"
    result = run_cli("render", "pytorch", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    return v0_meta(out, "linux-64", variant_combos(cbc)[0])


@pytest.mark.parametrize("version", ["1.13.1", "2.4.1", "2.6.0", "2.15.0"])
def test_every_library_the_cpu_package_links_comes_from_a_run_requirement(
    tmp_path: Path, version: str
) -> None:
    python = "3.10" if version != "2.15.0" else "3.12"
    run = _meta(tmp_path, "--version", version, "--cuda", "cpu", "--python", python)["requirements"]["run"]
    provided = dependency_libs(run)
    for lib in LINKED:
        assert any(fnmatchcase(lib, pattern) for pattern in provided), f"{lib}: no run requirement of {run}"


def test_numpy_and_mkl_run_ranges_follow_what_the_build_compiled_against(tmp_path: Path) -> None:
    meta = _meta(tmp_path, "--version", "2.6.0", "--cuda", "cpu", "--python", "3.12")
    assert "numpy 2.0.1.*" in meta["requirements"]["host"]
    assert "numpy >=1.19,<3.0a0" in meta["requirements"]["run"]
    assert "mkl >=2023.1,<2024.0a0" in meta["requirements"]["run"]


def test_nothing_only_pytorchs_frozen_channel_has_is_required(tmp_path: Path) -> None:
    for cuda in ("cpu", "13.0"):
        meta = _meta(tmp_path / cuda, "--version", "2.10.0", "--cuda", cuda, "--python", "3.12")
        run = meta["requirements"]["run"]
        names = {d.split()[0] for d in run}
        assert not names & {"pytorch-mutex", "cpuonly", "blas", "llvm-openmp"}, run


@pytest.mark.parametrize("family", ["pytorch", "libtorch"])
def test_what_cmake_would_detect_on_the_machine_is_decided_off(tmp_path: Path, family: str) -> None:
    out = tmp_path / "recipe"
    extra = ("--python", "3.12") if family == "pytorch" else ()
    result = run_cli("render", family, "--version", "2.6.0", "--cuda", "cpu", *extra, "-o", str(out))
    assert result.exit_code == 0, result.output
    build_sh = (out / "build.sh").read_text()
    off = "0" if family == "pytorch" else "OFF"  # setup.py's spelling, or CMake's
    for name in family_facts("pytorch")["system_detected_off"]:
        assert f'export {name}="{off}"' in build_sh
    assert "export USE_CCACHE=0" in build_sh  # the machine's ccache only through --compile-cache


@pytest.mark.parametrize("family", ["pytorch", "torchvision"])
def test_the_package_installs_only_into_the_python_it_was_compiled_for(tmp_path: Path, family: str) -> None:
    # The real 2.6.0 package built by rattler-build said `python` with no version: a cp312 torch._C
    # would have installed into a Python 3.11 environment. Both formats, as each engine renders them.
    out = tmp_path / "recipe"
    version = "2.6.0" if family == "pytorch" else "0.21.0"
    result = run_cli(
        "render", family, "--version", version, "--cuda", "cpu", "--python", "3.12", "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    assert "python 3.12.*" in v0_meta(out, "linux-64", variant_combos(cbc)[0])["requirements"]["run"]
    (rendered,) = v1_render(out, "linux-64")
    run = rendered.recipe.requirements.run
    assert any(str(dep) == "python 3.12.*" for dep in run), run

"""The conda-build engine drives `conda build` with the documented command line.

conda-build cannot be installed on this machine (it ships with conda, not pip), so these tests
put a STAND-IN `conda` executable (tests/standins/conda) first on PATH. The stand-in checks the
argv contract condapipe relies on (it rejects unknown flags like argparse, refuses a build
without --no-anaconda-upload or without the output folder as first channel), runs the recipe's
real build.sh with gcc, and packs a real package with conda-package-handling. Everything
condapipe does around it (argv, `--output` parsing, log streaming, diagnosis) is real. The
engine only builds; what it built enters a channel through the publish stage.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conda_package_handling import api as cph

from condapipe.engines import BuildOptions, CondaBuildEngine, engine_for_recipe, get_engine
from condapipe.engines.conda_build import _works
from condapipe.errors import BuildFailed, UsageError
from condapipe.publish.channel import publish_packages

HERE = Path(__file__).parent.parent
STANDINS = HERE / "standins"
RECIPES = HERE / "data" / "recipes"


@pytest.fixture
def standin_conda(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Put the stand-in `conda` first on PATH; returns the file its argv log goes to."""
    argv_log = tmp_path / "conda-argv.jsonl"
    monkeypatch.setenv("PATH", f"{STANDINS}:{os.environ['PATH']}")
    monkeypatch.setenv("CONDA_STANDIN_ARGV_LOG", str(argv_log))
    _works.cache_clear()
    yield argv_log
    _works.cache_clear()


def calls(argv_log: Path) -> list[list[str]]:
    return [json.loads(line) for line in argv_log.read_text().splitlines()]


def options(tmp_path: Path, **kw: object) -> BuildOptions:
    return BuildOptions(output_dir=tmp_path / "channel", work_dir=tmp_path / "work", **kw)  # type: ignore[arg-type]


def test_auto_picks_conda_build_when_conda_build_is_installed(standin_conda: Path) -> None:
    assert get_engine("auto").name == "conda-build"
    engine, why = engine_for_recipe(RECIPES / "hello-v0")
    assert engine.name == "conda-build"
    assert "conda build" in why


def test_build_runs_conda_build_with_the_documented_flags(standin_conda: Path, tmp_path: Path) -> None:
    opts = options(
        tmp_path,
        channels=("https://conda.anaconda.org/pytorch", "conda-forge"),
        override_channels=True,
        pythons=("3.10", "3.11"),
        compression_level=19,
    )
    result = CondaBuildEngine().build(RECIPES / "hello-v0", opts)

    out = str((tmp_path / "channel").resolve())
    build_calls = [c for c in calls(standin_conda) if c[:2] == ["build", str(RECIPES / "hello-v0")]]
    assert len(build_calls) == 2  # `--output` to learn the paths, then the build itself
    query, build = build_calls
    assert query == [*build[:2], "--output", *build[2:]]
    assert build[2:] == [
        "--output-folder", out,
        "-c", out,  # the output folder first: freshly built dependencies win
        "-c", "https://conda.anaconda.org/pytorch",
        "-c", "conda-forge",
        "--override-channels",
        "--python", "3.10",
        "--python", "3.11",
        "-m", str(RECIPES / "hello-v0" / "conda_build_config.yaml"),
        "--no-anaconda-upload",
        "--package-format", "conda",
        "--zstd-compression-level", "19",
        "--croot", str((tmp_path / "work" / "conda-bld").resolve()),
    ]  # fmt: skip

    # One package per --python variant, at the paths `conda build --output` announced.
    assert len(result.packages) == 2 and len(set(result.packages)) == 2
    for pkg in result.packages:
        assert pkg.parent == Path(out) / "linux-64"
        assert pkg.name.startswith("hello-v0-2.0.1-h") and pkg.name.endswith("_3.conda")
    # A real package: it unpacks and its program runs.
    unpacked = tmp_path / "unpacked"
    cph.extract(str(result.packages[0]), dest_dir=str(unpacked))
    assert json.loads((unpacked / "info" / "index.json").read_text())["version"] == "2.0.1"
    assert subprocess.run([unpacked / "bin" / "hello-v0"], check=False).returncode == 0
    # Published (the publish stage's job, not the engine's), they form a channel others build against.
    publish_packages(tmp_path / "published", result.packages)
    repodata = json.loads((tmp_path / "published" / "linux-64" / "repodata.json").read_text())
    assert {p.name for p in result.packages} <= set(repodata.get("packages.conda", {}))


def test_the_build_log_is_streamed_and_kept(standin_conda: Path, tmp_path: Path) -> None:
    streamed: list[str] = []  # the CLI's sink prints each line; the engine itself never prints
    result = CondaBuildEngine().build(
        RECIPES / "hello-v0", options(tmp_path, echo=lambda line, style: streamed.append(line))
    )
    log = result.log_path.read_text()
    assert "built hello-v0 with" in log  # output of the recipe's build.sh
    assert log.splitlines()[0].startswith("condapipe: ") and "--no-anaconda-upload" in log.splitlines()[0]
    assert any("built hello-v0 with" in line for line in streamed)
    assert streamed == log.splitlines()


def test_the_cli_shows_the_build_output_on_stderr_as_it_comes(standin_conda: Path, tmp_path: Path) -> None:
    from e2e_helpers import condapipe

    code, out, err = condapipe("build", str(RECIPES / "hello-v0"), "--engine", "conda-build", cwd=tmp_path)
    assert code == 0, err
    assert "built hello-v0 with" in err and "built hello-v0 with" not in out


def test_tar_bz2_format_is_passed_through(standin_conda: Path, tmp_path: Path) -> None:
    result = CondaBuildEngine().build(RECIPES / "hello-v0", options(tmp_path, package_format="tar.bz2"))
    (pkg,) = result.packages
    assert pkg.name.endswith(".tar.bz2") and pkg.is_file()
    build = calls(standin_conda)[-1]
    assert build[build.index("--package-format") + 1] == "tar.bz2"


def test_bzip2_level_is_refused_because_conda_build_has_no_such_flag(
    standin_conda: Path, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="no bzip2 compression level"):
        CondaBuildEngine().build(
            RECIPES / "hello-v0", options(tmp_path, package_format="tar.bz2", compression_level=9)
        )


def test_a_failed_build_reports_the_diagnosis_and_the_log(standin_conda: Path, tmp_path: Path) -> None:
    with pytest.raises(BuildFailed) as info:
        CondaBuildEngine().build(RECIPES / "needs-magma-v0", options(tmp_path))
    message = str(info.value)
    assert "conda build exited with 1" in message
    assert "magma headers not found" in message and "build magma first" in message
    assert (
        info.value.log_path
        and "magma_v2.h: No such file or directory" in Path(info.value.log_path).read_text()
    )
    assert not list((tmp_path / "channel").glob("*/*.conda"))


def test_dry_run_describes_the_command_without_building(standin_conda: Path, tmp_path: Path) -> None:
    (line,) = CondaBuildEngine().describe(RECIPES / "hello-v0", options(tmp_path, run_tests=False))
    assert line.split()[1:3] == ["build", str(RECIPES / "hello-v0")]
    assert "--no-test" in line.split()
    assert all(c == ["build", "--version"] for c in calls(standin_conda))
    assert not (tmp_path / "channel").exists()


def test_a_v1_only_recipe_is_refused_by_conda_build(standin_conda: Path) -> None:
    with pytest.raises(UsageError, match="use --engine rattler-build"):
        engine_for_recipe(RECIPES / "libgreet", "conda-build")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")
def test_cuda_smoke_builds_from_its_v0_recipe_with_conda_build(standin_conda: Path, tmp_path: Path) -> None:
    """The same spec renders meta.yaml + conda_build_config.yaml that conda build (stand-in) builds
    with the real nvcc: the variant keys reach build.sh and the package has the requested archs."""
    from e2e_helpers import build_json

    from condapipe.buildspec.arch import parse_arch_list
    from condapipe.verify.verifier import verify_package

    result = build_json(
        "cuda-smoke", "--cuda", "13.0", "--arch", "8.0;9.0+PTX", "--engine", "conda-build", cwd=tmp_path
    )
    assert result["engine"] == "conda-build"
    (pkg,) = map(Path, result["packages"])
    report = verify_package(pkg, archs=parse_arch_list("8.0;9.0+PTX", cuda="13.0"))
    assert report.ok, report.errors
    assert report.to_dict()["fatbins"]["lib/libcuda_smoke.so"]["sass"] == ["sm_80", "sm_90"]
    (build,) = [c for c in calls(standin_conda) if c[:1] == ["build"] and "--output" not in c and len(c) > 2]
    assert build[build.index("-m") + 1].endswith("conda_build_config.yaml")


def test_a_standalone_conda_build_executable_is_used_when_conda_is_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("conda"):
        pytest.skip("a real conda is on PATH")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "conda-build").symlink_to(STANDINS / "conda")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("CONDA_STANDIN_ARGV_LOG", str(tmp_path / "argv.jsonl"))
    _works.cache_clear()
    try:
        engine, _ = engine_for_recipe(RECIPES / "hello-v0")
        result = engine.build(RECIPES / "hello-v0", options(tmp_path))
    finally:
        _works.cache_clear()
    assert engine.name == "conda-build"
    assert result.log_path.read_text().splitlines()[0].startswith(f"condapipe: {bin_dir / 'conda-build'} ")
    (pkg,) = result.packages
    assert pkg.is_file()


# --- conda-build's real behaviours the stand-in reproduces (conda-build 26, conda_build/create_test.py) ---

TESTED_META = """package:
  name: hello-tested
  version: 1.0.0

build:
  number: 0

test:
  requires:
    - bash
  files:
    - data/expected.txt
  commands:
    - hello-tested | grep -q hello
    - test -f "$PREFIX/bin/hello-tested"
"""
TESTED_BUILD = """#!/bin/bash
mkdir -p "$PREFIX/bin"
printf '#!/bin/sh\\n%s\\n' "{echo}" > "$PREFIX/bin/hello-tested"
chmod +x "$PREFIX/bin/hello-tested"
"""


def make_tested_recipe(root: Path, echo: str = "echo hello", meta: str = TESTED_META) -> Path:
    recipe = root / "hello-tested"
    (recipe / "data").mkdir(parents=True)
    (recipe / "meta.yaml").write_text(meta)
    (recipe / "build.sh").write_text(TESTED_BUILD.format(echo=echo))
    (recipe / "data" / "expected.txt").write_text("hello\n")
    return recipe


def test_a_conda_build_package_keeps_its_tests_in_info_test(standin_conda: Path, tmp_path: Path) -> None:
    result = CondaBuildEngine().build(make_tested_recipe(tmp_path), options(tmp_path, run_tests=False))
    (pkg,) = result.packages
    out = tmp_path / "unpacked"
    cph.extract(str(pkg), dest_dir=str(out))
    script = (out / "info" / "test" / "run_test.sh").read_text()
    assert "set -ex" in script and script.rstrip().endswith("exit 0")
    assert 'hello-tested | grep -q hello\ntest -f "$PREFIX/bin/hello-tested"\n' in script
    assert json.loads((out / "info" / "test" / "test_time_dependencies.json").read_text()) == ["bash"]
    assert (out / "info" / "test" / "data" / "expected.txt").read_text() == "hello\n"


def test_a_missing_build_tool_shows_condas_error_line_and_keeps_the_log(
    standin_conda: Path, tmp_path: Path
) -> None:
    meta = TESTED_META.replace(
        "build:\n  number: 0\n", "build:\n  number: 0\n\nrequirements:\n  build:\n    - cmake\n"
    )
    with pytest.raises(BuildFailed) as info:
        CondaBuildEngine().build(make_tested_recipe(tmp_path, meta=meta), options(tmp_path))
    message = str(info.value)
    # conda's own error, not the last line of its help text ("and use the search bar ...").
    assert (
        "PackagesNotFoundError: The following packages are not available from current channels: cmake"
        in message
    )
    assert "search bar" not in message.splitlines()[0]
    assert "dependency not found in the channels" in message
    log = Path(info.value.log_path or "")
    assert "No candidates were found for cmake" in log.read_text()
    assert "--output" in log.read_text().splitlines()[0]
    assert not list((tmp_path / "channel").glob("*/*.conda"))

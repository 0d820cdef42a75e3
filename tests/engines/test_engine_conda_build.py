"""The conda-build engine drives the REAL `conda build` (conda-build 26.7.1, the `real_conda` fixture
of tests/conftest.py: installed by .ci/run from ../shared/wheels/conda-build; skipped, naming how to
install it, where this checkout has none). Builds here are offline: every dependency comes from a local
channel. The stand-in (tests/standins/conda) stays only where the real tool cannot run here: remote
channels in the argv (no network); that test says which real behaviour it mirrors. The engine only
builds; what it built enters a channel through the publish stage.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conda_package_handling import api as cph
from conftest import HOW_TO_GET_CONDA_BUILD, conda_build_venv
from e2e_helpers import conda_install

from condapipe.engines import BuildOptions, CondaBuildEngine, engine_for_recipe, get_engine
from condapipe.engines.conda_build import _works
from condapipe.errors import BuildFailed, UsageError
from condapipe.publish.local_channel import publish_packages

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


def test_auto_picks_conda_build_when_conda_build_is_installed(real_conda: Path) -> None:
    assert get_engine("auto").name == "conda-build"
    engine, why = engine_for_recipe(RECIPES / "hello-v0")
    assert engine.name == "conda-build"
    assert "conda build" in why


def test_build_runs_conda_build_with_the_documented_flags(standin_conda: Path, tmp_path: Path) -> None:
    """Stand-in: remote channels (-c https://..., conda-forge) cannot be reached here. It mirrors the
    real conda build's argparse contract; the real tool's own reading of these flags is tested below
    (several pythons, formats, logs). conda-build starts once: the packages are the files the build
    wrote, not a second `conda build --output` run (which renders and solves again)."""
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
    (build,) = build_calls
    assert build[2:] == [
        "--output-folder", out,
        "-c", out,  # the output folder first: freshly built dependencies win
        "-c", "https://conda.anaconda.org/pytorch",
        "-c", "conda-forge",
        "--override-channels",
        "-m", str(RECIPES / "hello-v0" / "conda_build_config.yaml"),
        "-m", str((tmp_path / "work" / "conda-build-python.yaml").resolve()),  # several --python
        "--no-anaconda-upload",
        "--package-format", "conda",
        "--zstd-compression-level", "19",
        "--croot", str((tmp_path / "work" / "conda-bld").resolve()),
    ]  # fmt: skip

    assert len(result.packages) == len(set(result.packages)) >= 1


def test_several_pythons_build_one_package_each_with_the_real_tool(real_conda: Path, tmp_path: Path) -> None:
    """conda build --python takes one version (twice, conda-build 26.7.1 crashes: "unhashable type:
    'list'"); condapipe passes several as a variant file, and a recipe that uses python gets one
    package per version. hello-v0 does not use python: conda-build drops the key and builds it once."""
    recipe = tmp_path / "pyvar"
    recipe.mkdir()
    (recipe / "meta.yaml").write_text(PY_META)
    opts = options(tmp_path, pythons=("3.10", "3.11"), run_tests=False)
    result = CondaBuildEngine().build(recipe, opts)
    assert sorted(p.name for p in result.packages) == ["pyvar-1.0-py310_0.conda", "pyvar-1.0-py311_0.conda"]
    assert all(p.is_file() for p in result.packages)
    (hello,) = CondaBuildEngine().build(RECIPES / "hello-v0", opts).packages
    assert hello.name == "hello-v0-2.0.1-3.conda"
    # A real package: it unpacks and its program runs.
    unpacked = tmp_path / "unpacked"
    cph.extract(str(hello), dest_dir=str(unpacked))
    assert json.loads((unpacked / "info" / "index.json").read_text())["version"] == "2.0.1"
    assert subprocess.run([unpacked / "bin" / "hello-v0"], check=False).returncode == 0
    # Published (the publish stage's job, not the engine's), it installs with the real conda and runs.
    publish_packages(tmp_path / "published", [hello, *result.packages])
    repodata = json.loads((tmp_path / "published" / "linux-64" / "repodata.json").read_text())
    assert {p.name for p in result.packages} | {hello.name} <= set(repodata.get("packages.conda", {}))
    conda_install(real_conda, tmp_path / "published", ["hello-v0"], tmp_path / "env")
    assert subprocess.run([tmp_path / "env" / "bin" / "hello-v0"], check=False).returncode == 0


PY_META = """package:
  name: pyvar
  version: "1.0"
build:
  number: 0
  string: py{{ python | replace('.', '') }}_0
  script: echo "built for python $python"
"""


def test_the_build_log_is_streamed_and_kept(real_conda: Path, tmp_path: Path) -> None:
    streamed: list[str] = []  # the CLI's sink prints each line; the engine itself never prints
    result = CondaBuildEngine().build(
        RECIPES / "hello-v0", options(tmp_path, echo=lambda line, style: streamed.append(line))
    )
    log = result.log_path.read_text()
    assert "built hello-v0 with" in log  # output of the recipe's build.sh
    assert log.splitlines()[0].startswith("condapipe: ") and "--no-anaconda-upload" in log.splitlines()[0]
    assert any("built hello-v0 with" in line for line in streamed)
    assert streamed == log.splitlines()


def test_the_cli_shows_the_build_output_on_stderr_as_it_comes(real_conda: Path, tmp_path: Path) -> None:
    from e2e_helpers import condapipe

    code, out, err = condapipe("build", str(RECIPES / "hello-v0"), "--engine", "conda-build", cwd=tmp_path)
    assert code == 0, err
    assert "built hello-v0 with" in err and "built hello-v0 with" not in out


def test_tar_bz2_format_is_passed_through(real_conda: Path, tmp_path: Path) -> None:
    result = CondaBuildEngine().build(RECIPES / "hello-v0", options(tmp_path, package_format="tar.bz2"))
    (pkg,) = result.packages
    assert pkg.name == "hello-v0-2.0.1-3.tar.bz2" and pkg.is_file()
    assert "--package-format tar.bz2" in result.log_path.read_text().splitlines()[0]


def test_bzip2_level_is_refused_because_conda_build_has_no_such_flag(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no bzip2 compression level"):
        CondaBuildEngine().argv(
            ("conda", "build"),
            RECIPES / "hello-v0",
            options(tmp_path, package_format="tar.bz2", compression_level=9),
        )


def test_a_failed_build_reports_the_diagnosis_and_the_log(real_conda: Path, tmp_path: Path) -> None:
    with pytest.raises(BuildFailed) as info:
        CondaBuildEngine().build(RECIPES / "needs-magma-v0", options(tmp_path))
    message = str(info.value)
    assert "conda build exited with 1" in message
    # The real cause line conda-build ends with, not only the exit status.
    assert "BuildScriptException: Command" in message and "returned non-zero exit status 1" in message
    assert "magma headers not found" in message and "build magma first" in message
    assert (
        info.value.log_path
        and "magma_v2.h: No such file or directory" in Path(info.value.log_path).read_text()
    )
    assert not list((tmp_path / "channel").glob("*/*.conda"))


def test_dry_run_describes_the_command_without_building(real_conda: Path, tmp_path: Path) -> None:
    (line,) = CondaBuildEngine().describe(RECIPES / "hello-v0", options(tmp_path, run_tests=False))
    assert line.split()[:3] == [str(real_conda / "conda"), "build", str(RECIPES / "hello-v0")]
    assert "--no-test" in line.split()
    assert not (tmp_path / "channel").exists() and not (tmp_path / "work").exists()


def test_a_v1_only_recipe_is_refused_by_conda_build() -> None:
    with pytest.raises(UsageError, match="use --engine rattler-build"):
        engine_for_recipe(RECIPES / "libgreet", "conda-build")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")
def test_cuda_smoke_builds_from_its_v0_recipe_with_conda_build(real_conda: Path, tmp_path: Path) -> None:
    """The same spec renders meta.yaml + conda_build_config.yaml that the real conda build builds with
    the real nvcc: the variant keys reach build.sh, the package has the requested archs, its tests ran,
    and it installs with the real conda into a fresh environment and runs."""
    from e2e_helpers import build_json, run_clean

    from condapipe.facts.arch import parse_arch_list
    from condapipe.verify.verifier import verify_package

    result = build_json(
        "cuda-smoke", "--cuda", "13.0", "--arch", "8.0;9.0+PTX", "--engine", "conda-build", cwd=tmp_path
    )
    assert result["engine"] == "conda-build"
    (pkg,) = map(Path, result["packages"])
    report = verify_package(tmp_path / pkg, archs=parse_arch_list("8.0;9.0+PTX", cuda="13.0"))
    assert report.ok, report.errors
    assert report.to_dict()["fatbins"]["lib/libcuda_smoke.so"]["sass"] == ["sm_80", "sm_90"]
    (details,) = result["package_details"]
    assert details["tests"].endswith("passed"), details
    (log,) = (tmp_path / ".condapipe" / "logs").glob("*-conda-build-*.log")
    argv = log.read_text().splitlines()[0].split()
    assert argv[argv.index("-m") + 1].endswith("conda_build_config.yaml")
    env = tmp_path / "elsewhere" / "env"
    conda_install(real_conda, tmp_path / "channel", ["cuda-smoke"], env)
    proc = run_clean([env / "bin" / "cuda-smoke", "--build-info"])
    assert proc.stdout == "cuda-smoke built with CUDA 13.0 for archs 8.0;9.0+PTX\n", proc.stderr


def test_a_standalone_conda_build_executable_is_used_when_conda_is_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conda-build's own `conda-build` entry point (the real one, alone in a PATH folder) builds on a
    machine whose PATH has it but no `conda`."""
    if shutil.which("conda"):
        pytest.skip("a conda is on PATH")
    venv = conda_build_venv()
    if venv is None:
        pytest.skip(HOW_TO_GET_CONDA_BUILD)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "conda-build").symlink_to(venv / "bin" / "conda-build")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("CONDA_PKGS_DIRS", str(tmp_path / "pkgs"))
    _works.cache_clear()
    try:
        engine, _ = engine_for_recipe(RECIPES / "hello-v0")
        result = engine.build(RECIPES / "hello-v0", options(tmp_path, run_tests=False))
    finally:
        _works.cache_clear()
    assert engine.name == "conda-build"
    assert result.log_path.read_text().splitlines()[0].startswith(f"condapipe: {bin_dir / 'conda-build'} ")
    (pkg,) = result.packages
    assert pkg.name == "hello-v0-2.0.1-3.conda" and pkg.is_file()


def test_a_conda_without_conda_build_gives_way_to_the_standalone_conda_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `conda` first on PATH that has no build command (conda-build is not installed into it):
    the build it refuses is not reported as the recipe's failure; the real standalone `conda-build`
    next to it builds the package, and only that build's log is kept."""
    venv = conda_build_venv()
    if venv is None:
        pytest.skip(HOW_TO_GET_CONDA_BUILD)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    conda = bin_dir / "conda"  # what conda prints for a subcommand it does not have
    conda.write_text("#!/bin/sh\necho \"conda: error: argument COMMAND: invalid choice: '$1'\" >&2\nexit 2\n")
    conda.chmod(0o755)
    (bin_dir / "conda-build").symlink_to(venv / "bin" / "conda-build")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("CONDA_PKGS_DIRS", str(tmp_path / "pkgs"))
    _works.cache_clear()
    try:
        result = CondaBuildEngine().build(RECIPES / "hello-v0", options(tmp_path, run_tests=False))
    finally:
        _works.cache_clear()
    (pkg,) = result.packages
    assert pkg.name == "hello-v0-2.0.1-3.conda" and pkg.is_file()
    assert result.log_path.read_text().splitlines()[0].startswith(f"condapipe: {bin_dir / 'conda-build'} ")
    assert [p.name for p in result.log_path.parent.iterdir()] == [result.log_path.name]


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


def test_a_conda_build_package_keeps_its_tests_in_info_test(real_conda: Path, tmp_path: Path) -> None:
    result = CondaBuildEngine().build(make_tested_recipe(tmp_path), options(tmp_path, run_tests=False))
    (pkg,) = result.packages
    out = tmp_path / "unpacked"
    cph.extract(str(pkg), dest_dir=str(out))
    script = (out / "info" / "test" / "run_test.sh").read_text()
    assert "set -ex" in script and script.rstrip().endswith("exit 0")
    assert 'hello-tested | grep -q hello\ntest -f "$PREFIX/bin/hello-tested"\n' in script
    assert json.loads((out / "info" / "test" / "test_time_dependencies.json").read_text()) == ["bash"]
    assert (out / "info" / "test" / "data" / "expected.txt").read_text() == "hello\n"


def test_a_missing_build_tool_is_named_with_the_channels_searched_and_the_fix(
    real_conda: Path, tmp_path: Path
) -> None:
    """conda-build 26.7.1 prints "ERROR: Failed to get package records, max retries exceeded." before
    the traceback that ends in PackagesNotFoundError; the error names cmake, not the retry summary."""
    meta = TESTED_META.replace(
        "build:\n  number: 0\n", "build:\n  number: 0\n\nrequirements:\n  build:\n    - cmake\n"
    )
    recipe = make_tested_recipe(tmp_path, meta=meta)
    with pytest.raises(BuildFailed) as info:
        CondaBuildEngine().build(recipe, options(tmp_path))
    message = str(info.value)
    first = message.split(" — ")[0]
    assert (
        "PackagesNotFoundError: The following packages are not available from current channels: cmake"
        in first
    )
    assert "Failed to get package records" not in message and "search bar" not in message
    assert f"channels searched: {(tmp_path / 'channel').resolve().as_uri()}" in first
    assert "dependency not found in the channels" in message and "--build-tools wheels" in message
    log = Path(info.value.log_path or "")
    assert log.read_text().splitlines()[0].startswith("condapipe: ")  # the build's own command line
    assert not list((tmp_path / "channel").glob("*/*.conda"))

    # A channel that holds a package: conda-build renders without solving, the build's solve fails,
    # and the error still ends in conda-build's cause line naming cmake.
    hello = CondaBuildEngine().build(RECIPES / "hello-v0", options(tmp_path / "h", run_tests=False))
    publish_packages(tmp_path / "channel", hello.packages)
    with pytest.raises(BuildFailed) as info:
        CondaBuildEngine().build(recipe, options(tmp_path))
    first = str(info.value).split(" — ")[0]
    assert first.startswith(f"conda build exited with 1 for {recipe}: ")
    assert 'MatchSpec("cmake")' in first and "channels searched:" in first
    assert "dependency not found in the channels" in str(info.value)

"""The rattler-build engine builds v1 recipes with py-rattler-build (in a process of its own), offline.

These build real (tiny) packages with the machine's bash/gcc and no conda channel at all: the
only channel is the local output folder. The engine only builds: like every caller, the tests
prepare (index) that folder with the publish stage first, and nothing the engine does indexes it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conda_package_handling import api as cph

from condapipe.engines import BuildOptions, EngineResult, RattlerBuildEngine, engine_for_recipe, get_engine
from condapipe.engines.conda_build import _works
from condapipe.engines.rattler_build import package_format_arg
from condapipe.errors import BuildFailed, EnvironmentProblem, UsageError
from condapipe.package.channel_index import ensure_channel

RECIPES = Path(__file__).parent.parent / "data" / "recipes"

ECHO_RECIPE = """\
package:
  name: echo-env
  version: 0.1.0
build:
  number: 0
  script:
    env:
      MAX_JOBS: ${{ env.get("MAX_JOBS", default="1") }}
      PYVER: ${{ python }}
    content:
      - mkdir -p $PREFIX/share
      - echo "jobs=$MAX_JOBS python=$PYVER" > $PREFIX/share/echo-env.txt
      - echo "wrote echo-env for python $PYVER"
tests:
  - script:
      - grep -q jobs= $PREFIX/share/echo-env.txt
"""

FAILING_RECIPE = """\
package:
  name: needs-magma
  version: 0.1.0
build:
  script:
    - printf '#include <magma_v2.h>\\nint f(void){return 0;}\\n' > uses_magma.c
    - gcc -c uses_magma.c -o uses_magma.o
"""


def opts(tmp_path: Path, **kw: object) -> BuildOptions:
    return BuildOptions(output_dir=tmp_path / "channel", work_dir=tmp_path / "work", **kw)  # type: ignore[arg-type]


def build(recipe: Path, options: BuildOptions) -> EngineResult:
    """What callers do: prepare the local channel (publish stage), then let the engine build."""
    ensure_channel(options.output_dir)
    return RattlerBuildEngine().build(recipe, options)


def write_recipe(tmp_path: Path, name: str, text: str) -> Path:
    recipe = tmp_path / name
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(text)
    return recipe


def contents(pkg: Path, dest: Path, member: str) -> str:
    cph.extract(str(pkg), dest_dir=str(dest))
    return (dest / member).read_text()


@pytest.mark.parametrize(
    ("fmt", "level", "expected"),
    [("conda", None, "conda"), ("conda", 3, "conda:3"), ("tar.bz2", 9, "tar-bz2:9")],
)
def test_format_and_level_are_passed_as_rattler_build_spells_them(
    tmp_path: Path, fmt: str, level: int | None, expected: str
) -> None:
    assert package_format_arg(opts(tmp_path, package_format=fmt, compression_level=level)) == expected


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"package_format": "zip"}, "unknown package format 'zip'"),
        ({"compression_level": 23}, "out of range 1..22 for conda"),
        ({"package_format": "tar.bz2", "compression_level": 10}, "out of range 1..9 for tar.bz2"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, kw: dict, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        opts(tmp_path, **kw)


def test_the_output_dir_is_always_the_first_channel(tmp_path: Path) -> None:
    out = str((tmp_path / "channel").resolve())
    assert opts(tmp_path, channels=("conda-forge", out)).all_channels() == (out, "conda-forge")


def test_engine_choice_follows_the_recipe_files_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A machine without conda-build: PATH without any folder that holds `conda` or `conda-build`.
    kept = [d for d in os.environ["PATH"].split(os.pathsep) if not any(
        (Path(d) / name).exists() for name in ("conda", "conda-build"))]  # fmt: skip
    monkeypatch.setenv("PATH", os.pathsep.join(kept))
    _works.cache_clear()
    assert get_engine("auto").name == "rattler-build"
    assert engine_for_recipe(RECIPES / "libgreet")[0].name == "rattler-build"
    with pytest.raises(EnvironmentProblem, match=re.escape("only meta.yaml")) as info:
        engine_for_recipe(RECIPES / "hello-v0")
    assert info.value.exit_code == 3 and "conda install conda-build" in str(info.value)
    with pytest.raises(UsageError, match=re.escape("neither meta.yaml nor recipe.yaml")):
        engine_for_recipe(tmp_path)
    with pytest.raises(UsageError, match="unknown engine 'make'"):
        get_engine("make")


def test_env_and_python_variants_reach_the_build_and_the_callers_env_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAX_JOBS", raising=False)
    recipe = write_recipe(tmp_path, "echo-env", ECHO_RECIPE)
    streamed: list[str] = []
    result = build(
        recipe,
        opts(
            tmp_path,
            env=(("MAX_JOBS", "7"),),
            pythons=("3.10", "3.12"),
            echo=lambda line, style: streamed.append(line),
        ),
    )
    assert "MAX_JOBS" not in os.environ
    assert len(result.packages) == 2  # one per Python variant
    texts = sorted(
        contents(pkg, tmp_path / f"x{i}", "share/echo-env.txt") for i, pkg in enumerate(result.packages)
    )
    assert texts == ["jobs=7 python=3.10\n", "jobs=7 python=3.12\n"]
    # The log is streamed to the caller's sink (the CLI prints it on stderr) and kept in the work dir.
    log = result.log_path.read_text()
    assert result.log_path.parent == tmp_path / "work" / "logs"
    assert "wrote echo-env for python 3.10" in log and "all tests passed" in log
    assert any("wrote echo-env for python 3.12" in line for line in streamed)


def test_no_test_skips_the_recipe_tests(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "echo-env", ECHO_RECIPE)
    result = build(recipe, opts(tmp_path, pythons=("3.11",), run_tests=False))
    assert "Testing commands" not in result.log_path.read_text()
    assert len(result.packages) == 1


def test_the_engine_leaves_packages_in_its_output_folder_and_indexes_nothing(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "echo-env", ECHO_RECIPE)
    result = build(recipe, opts(tmp_path, pythons=("3.11",)))
    (pkg,) = result.packages
    assert pkg.parent == tmp_path / "channel" / "linux-64" and pkg.is_file()
    # Indexing is the publish stage's job: the engine wrote no repodata next to the package.
    assert not (pkg.parent / "repodata.json").exists()
    assert not list((tmp_path / "work" / "rattler-build").iterdir())  # its scratch folder is gone


def test_a_failed_build_names_the_cause_and_publishes_nothing(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "needs-magma", FAILING_RECIPE)
    with pytest.raises(BuildFailed) as info:
        build(recipe, opts(tmp_path))
    message = str(info.value)
    assert message.startswith(f"rattler-build failed to build {recipe}")
    assert "magma headers not found" in message and "build magma first" in message
    log = Path(info.value.log_path or "").read_text()
    assert "magma_v2.h: No such file or directory" in log
    channel = tmp_path / "channel"
    assert not [p for p in channel.rglob("*") if p.name.endswith((".conda", ".tar.bz2")) or ".tmp" in p.name]
    # The prepared (empty) output folder is still a valid channel for the next build.
    assert json.loads((channel / "noarch" / "repodata.json").read_text())["packages"] == {}


def test_an_unparsable_recipe_is_a_one_line_usage_error(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "broken", "package:\n  name: [unclosed\n")
    with pytest.raises(UsageError, match="cannot parse") as info:
        RattlerBuildEngine().build(recipe, opts(tmp_path))
    assert "\n" not in str(info.value)


def test_a_recipe_dir_without_recipe_yaml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=re.escape("has no recipe.yaml")):
        RattlerBuildEngine().build(RECIPES / "hello-v0", opts(tmp_path))


def test_dry_run_description_changes_nothing(tmp_path: Path) -> None:
    lines = RattlerBuildEngine().describe(RECIPES / "libgreet", opts(tmp_path, package_format="tar.bz2"))
    assert lines[0] == f"rattler-build: build {RECIPES / 'libgreet' / 'recipe.yaml'}"
    assert "package format: tar-bz2" in lines
    assert not (tmp_path / "channel").exists() and not (tmp_path / "work").exists()

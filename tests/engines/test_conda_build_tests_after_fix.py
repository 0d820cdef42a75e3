"""A conda-build package's own tests (info/test/) run again after fix, before publish.

conda-build keeps a v0 recipe's tests inside the package (conda_build/create_test.py: test
commands in info/test/run_test.sh, imports in run_test.py, test/requires in
test_time_dependencies.json). rattler-build's Package API counts only v1 tests, so a package
rewritten by `fix` used to be published untested with "no tests" in the report. The test step
now runs those scripts in a fresh environment made from the fixed package, as `conda build --test`
does (condapipe.plan.conda_build_tests: conda-build's test variables set, the scripts' output kept
in the step log), counts them in the report, and stops the pipeline when one fails.
Built with the real conda-build (the `real_conda` fixture), except where noted: real conda-build
already runs these tests in its own test environment, so a test that passes there and fails after fix
needs the stand-in (tests/standins/conda), which writes info/test/ as the real one but runs the tests
in its build prefix.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from e2e_helpers import condapipe
from test_engine_conda_build import TESTED_META, make_tested_recipe

from condapipe.engines.conda_build import _works

STANDINS = Path(__file__).parent.parent / "standins"


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{STANDINS}:{os.environ['PATH']}")
    _works.cache_clear()


def build(recipe: Path, cwd: Path) -> tuple[int, dict]:
    code, out, _err = condapipe(
        "build", str(recipe), "--engine", "conda-build", "--output-dir", str(cwd / "chan"), "--json", cwd=cwd
    )
    return code, json.loads(out)


def step(result: dict, kind: str) -> dict:
    (found,) = [s for s in result["steps"] if s["kind"] == kind]
    return found


NO_REQUIRES = TESTED_META.replace("  requires:\n    - bash\n", "")


def test_the_packages_own_tests_run_after_fix_and_are_counted(real_conda: Path, tmp_path: Path) -> None:
    code, result = build(make_tested_recipe(tmp_path, meta=NO_REQUIRES), tmp_path)
    assert code == 0, result.get("error")
    assert list(step(result, "test")["data"]["tests"].values()) == ["1 passed"]
    log = Path(step(result, "test")["log"]).read_text()
    assert "conda-build tests run_test.sh; test requires nothing" in log
    assert list((tmp_path / "chan" / "linux-64").glob("hello-tested-*.conda"))


def test_a_test_that_fails_in_the_installed_package_stops_the_publish(standin: None, tmp_path: Path) -> None:
    """Stand-in: mirrors a package whose tests conda-build passed and whose fixed package fails them.
    The real tool cannot be made to do that here: it runs the tests in its own test environment from
    the package it built, so a test that fails after fix fails inside `conda build` too (the next test
    is that path). The stand-in writes info/test/ as conda-build does but runs the tests in the build
    prefix, where conda-meta is missing, so this test passes there and fails in the installed package."""
    meta = NO_REQUIRES + '    - test ! -d "$PREFIX/conda-meta"\n'
    code, result = build(make_tested_recipe(tmp_path, meta=meta), tmp_path)
    assert code == 1
    assert re.search(
        r"conda-build test run_test.sh of hello-tested-\S+\.conda failed \(exit 1\)", result["error"]
    )
    assert (
        "+ test '!' -d " in result["error"] and "/conda-meta" in result["error"]
    )  # the failed command, quoted
    assert step(result, "test")["status"] == "failed"
    assert not list((tmp_path / "chan").glob("*/hello-tested-*.conda"))


def test_a_test_requirement_in_no_channel_is_named(real_conda: Path, tmp_path: Path) -> None:
    # Real conda-build solves test/requires when it tests the package inside `conda build`: the error
    # ends in its cause line naming bash and the channels searched.
    code, result = build(make_tested_recipe(tmp_path), tmp_path)  # test/requires: bash
    assert code == 1
    assert "bash" in result["error"] and "channels searched:" in result["error"], result["error"]
    assert "dependency not found in the channels" in result["error"]


def test_a_failing_test_fails_inside_the_real_conda_build(real_conda: Path, tmp_path: Path) -> None:
    meta = NO_REQUIRES + '    - test ! -d "$PREFIX/conda-meta"\n'
    code, result = build(make_tested_recipe(tmp_path, meta=meta), tmp_path)
    assert code == 1
    assert "conda build exited with 1" in result["error"], result["error"]
    assert not list((tmp_path / "chan").glob("*/hello-tested-*.conda"))


def test_the_retest_sets_conda_builds_variables_and_logs_the_failing_line(
    standin: None, tmp_path: Path
) -> None:
    """A recipe's test may read what conda-build sets for it (PKG_NAME, PKG_VERSION, PREFIX,
    CONDA_BUILD; CONDA_PY and friends with python): the re-test sets them too, and a failure's
    output (the assertion as the script printed it) is in the step log and quoted in the error.
    Stand-in as above: the last command passes in its build prefix and fails once installed."""
    meta = NO_REQUIRES + (
        '    - echo "checking ${PKG_NAME:-unset} ${PKG_VERSION:-unset} ${CONDA_BUILD:-unset}'
        ' ${CONDA_PREFIX:-unset}"\n'
        '    - test ! -d "$PREFIX/conda-meta"\n'
    )
    code, result = build(make_tested_recipe(tmp_path, meta=meta), tmp_path)
    assert code == 1
    log = Path(step(result, "test")["log"]).read_text()
    # the script's output line (not bash's trace of the echo): CONDA_PREFIX is the installed test env
    output_line = r"(?m)checking hello-tested 1\.0\.0 1 ([^\s']+/_test_env_placehold[^\s']*)$"
    (prefix,) = set(re.findall(output_line, log))
    assert len(prefix) == 255  # padded as conda-build pads its test prefix
    assert "+ test '!' -d" in log and f"checking hello-tested 1.0.0 1 {prefix}" in result["error"]

"""End to end, offline: `condapipe build DIR` builds user recipes with rattler-build and the
machine's gcc + cmake, and the results install and run anywhere.

(a) libgreet: a C shared library + CLI (tests/data/recipes/libgreet, a v1 recipe).
(b) greet-app: links libgreet, which it finds in the local output channel (host + run).
Installed with py-rattler into a fresh prefix in another directory, greet-app runs with no
LD_LIBRARY_PATH (rpath), and text files that embedded the build prefix name the install prefix.
"""

from __future__ import annotations

import json
from pathlib import Path

import lief
import pytest
from conda_package_handling import api as cph
from e2e_helpers import build_json, condapipe, install, run_clean

RECIPES = Path(__file__).parent.parent / "data" / "recipes"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("project")


@pytest.fixture(scope="module")
def libgreet(project: Path) -> dict:
    return build_json(str(RECIPES / "libgreet"), cwd=project)


@pytest.fixture(scope="module")
def greet_app(project: Path, libgreet: dict) -> dict:
    # .tar.bz2 at bzip2 level 9: the format/compression options reach rattler-build.
    return build_json(
        str(RECIPES / "greet-app"), "--package-format", "tar.bz2", "--compression-level", "9", cwd=project
    )


@pytest.fixture(scope="module")
def installed(
    project: Path, greet_app: dict, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[str]]:
    prefix = tmp_path_factory.mktemp("elsewhere") / "env"
    names = install(project / "channel", ["greet-app"], prefix, tmp_path_factory.mktemp("pkgs-cache"))
    return prefix, names


def test_a_library_and_cli_package_is_built_and_tested_by_rattler_build(
    project: Path, libgreet: dict
) -> None:
    assert libgreet["engine"] == "rattler-build"
    assert libgreet["mode"] == "recipe-dir"
    (pkg,) = map(Path, libgreet["packages"])
    assert (project / pkg).parent == project / "channel" / "linux-64"
    assert pkg.name.startswith("libgreet-1.2.0-") and pkg.name.endswith(".conda")
    # The recipe's own tests ran (in a fresh environment) and passed.
    log = (project / libgreet["log"]).read_text()
    assert "hello, world! (libgreet 1.2.0)" in log
    assert "all tests passed" in log
    _extract(project / pkg, project / "x-libgreet", "info/index.json")
    paths = json.loads((project / "x-libgreet" / "info" / "paths.json").read_text())["paths"]
    files = {p["_path"] for p in paths}
    assert {"bin/greet", "include/greet.h", "lib/libgreet.so.1", "share/libgreet/build-info.txt"} <= files


def test_the_output_dir_is_a_channel_with_both_packages(project: Path, greet_app: dict) -> None:
    repodata = json.loads((project / "channel" / "linux-64" / "repodata.json").read_text())
    names = {r["name"] for r in repodata["packages"].values()} | {
        r["name"] for r in repodata["packages.conda"].values()
    }
    assert names == {"libgreet", "greet-app"}
    (pkg,) = map(Path, greet_app["packages"])
    assert pkg.name.endswith(".tar.bz2")


def test_the_dependent_package_requires_the_library_it_linked(project: Path, greet_app: dict) -> None:
    (pkg,) = map(Path, greet_app["packages"])
    index = json.loads(_extract(project / pkg, project / "x-app", "info/index.json"))
    # run: libgreet >=1.2 from the recipe, plus libgreet's run_exports pin from the host env.
    assert "libgreet >=1.2" in index["depends"]
    assert "libgreet >=1.2.0,<1.3.0a0" in index["depends"]


def test_installed_elsewhere_the_binary_finds_its_library_through_rpath(
    installed: tuple[Path, list[str]],
) -> None:
    prefix, names = installed
    assert names == ["greet-app", "libgreet"]
    proc = run_clean([prefix / "bin" / "greet-app", "conda"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "greet-app: hello, conda! [libgreet 1.2.0]\n"
    binary = lief.parse(str(prefix / "bin" / "greet-app"))
    rpaths = [e.paths for e in binary.dynamic_entries if e.tag in (lief.ELF.DynamicEntry.TAG.RPATH,)]
    assert rpaths == [["$ORIGIN/../lib"]]
    assert "libgreet.so.1" in [lib for lib in binary.libraries]


def test_text_files_that_embedded_the_build_prefix_name_the_install_prefix(
    installed: tuple[Path, list[str]],
) -> None:
    prefix, _ = installed
    conf = (prefix / "etc" / "greet-app.conf").read_text()
    assert conf.splitlines()[-1] == f"data_dir={prefix}/share/greet-app"
    info = (prefix / "share" / "libgreet" / "build-info.txt").read_text()
    assert info.splitlines()[-1] == f"installed under {prefix}"
    assert "placehold" not in conf + info and "rattler-build_" not in conf + info


def test_rebuilding_replaces_the_package_in_the_channel_atomically(project: Path, libgreet: dict) -> None:
    again = build_json(str(RECIPES / "libgreet"), "--no-test", cwd=project)
    assert again["packages"] == libgreet["packages"]
    leftovers = [p.name for p in (project / "channel" / "linux-64").iterdir() if ".tmp" in p.name]
    assert leftovers == []


def test_spec_only_flags_are_refused_for_a_recipe_directory(project: Path) -> None:
    code, _, err = condapipe("build", str(RECIPES / "libgreet"), "--cuda", "13.0", cwd=project)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("error: --cuda only apply to package families")


def _extract(pkg: Path, dest: Path, member: str) -> str:
    if not dest.exists():
        cph.extract(str(pkg), dest_dir=str(dest))
    return (dest / member).read_text()


def test_dependencies_come_only_from_the_channels_not_from_earlier_builds(
    project: Path, libgreet: dict, tmp_path: Path
) -> None:
    # Same work dir, but a fresh output channel without libgreet: the build must not quietly use
    # the libgreet built earlier (rattler-build's scratch output is per build), and resolving
    # first stops it before anything compiles, naming the cause (exit 3: the channels lack it).
    code, _, err = condapipe(
        "build", str(RECIPES / "greet-app"), "--output-dir", str(tmp_path / "empty-channel"), "--offline",
        cwd=project,
    )  # fmt: skip
    assert code == 3
    last = err.strip().splitlines()[-1]
    assert "nothing was built" in last and "libgreet >=1.2 (greet-app (host), greet-app (test))" in last
    assert "build it first into the --output-dir" in last


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path: Path) -> None:
    code, out, _ = condapipe("build", str(RECIPES / "libgreet"), "--dry-run", "--json", cwd=tmp_path)
    assert code == 0
    plan = json.loads(out)
    assert (plan["engine"], plan["mode"], plan["dry_run"]) == ("rattler-build", "recipe-dir", True)
    assert "publish into: channel" in plan["actions"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("target", "message"),
    [("no/such/dir", "no/such/dir: no such directory"), (".", ". holds neither meta.yaml nor recipe.yaml")],
)
def test_a_bad_target_is_a_one_line_usage_error(tmp_path: Path, target: str, message: str) -> None:
    code, out, err = condapipe("build", target, cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == f"error: {message}\n"

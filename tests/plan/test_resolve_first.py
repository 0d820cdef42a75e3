"""Resolve first: a build's environments are solved (py-rattler) before anything compiles.

Against real local channels (packages packed by condapipe, indexed by py-rattler), served from a
folder and by an HTTP server on 127.0.0.1, and against remote channels that do not answer: a
closed port, a server that never replies, and conda-forge behind a proxy that refuses (as on a
machine without network). A missing package is named with what needs it, the channels searched,
whether each answered, and the fix.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from channel_helpers import Pkg, closed_port_url, http_channel, make_channel, silent_server, slow_server
from e2e_helpers import condapipe

RECIPE = """\
package:
  name: hello-resolve
  version: 1.0.0
source:
  path: src/
build:
  number: 0
  script:
    - mkdir -p $PREFIX/share/hello-resolve
    - echo hi > $PREFIX/share/hello-resolve/hi.txt
requirements:
  build:
    - cmake
  host:
    - python
    - numpy
{extra}  run:
    - python
tests:
  - script:
      - test -f $PREFIX/share/hello-resolve/hi.txt
"""

PACKAGES = (
    Pkg("cmake", "3.30.2"),
    Pkg("python", "3.11.9"),
    Pkg("python", "3.12.4"),
    Pkg("numpy", "2.0.2", ("python >=3.11,<3.12.0a0",)),
    Pkg("numpy", "2.1.0", ("python >=3.12,<3.13.0a0",)),
)


def recipe(root: Path, extra_host: tuple[str, ...] = ()) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "README").write_text("hello\n")
    extra = "".join(f"    - {spec}\n" for spec in extra_host)
    (root / "recipe.yaml").write_text(RECIPE.format(extra=extra))
    (root / "variants.yaml").write_text('python:\n  - "3.11"\n')
    return root


@pytest.fixture(scope="module")
def deps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_channel(tmp_path_factory.mktemp("deps") / "deps", PACKAGES)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """conda-forge answers nowhere in these tests, whatever network the machine has: HTTPS goes to
    a proxy port where nothing listens (as a machine without network fails: at once)."""
    monkeypatch.setenv("HTTPS_PROXY", closed_port_url())
    monkeypatch.setenv("https_proxy", closed_port_url())
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")


def dry(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    return condapipe(
        "build", str(tmp_path / "hello"), "--engine", "rattler-build", "--dry-run", *args, cwd=tmp_path
    )


def test_a_dry_run_shows_the_solved_versions_and_the_source(tmp_path: Path, deps: Path) -> None:
    recipe(tmp_path / "hello")
    code, out, err = dry(tmp_path, "-c", str(deps))
    assert code == 0, err
    assert f"file://{deps}" in out and "(local, reachable)" in out
    assert "build env (1 packages): cmake 3.30.2" in out
    # python pinned to the variant (3.11), numpy solved to the build that fits it
    assert "host env (2 packages): numpy 2.0.2, python 3.11.9" in out
    assert f"source local {tmp_path / 'hello' / 'src'}" in out
    assert list(tmp_path.iterdir()) == [tmp_path / "hello"]  # a dry run writes nothing


def test_the_json_dry_run_lists_every_solved_package(tmp_path: Path, deps: Path) -> None:
    recipe(tmp_path / "hello")
    code, out, err = dry(tmp_path, "-c", str(deps), "--json")
    assert code == 0, err
    resolved = json.loads(out)["resolve"]
    envs = {
        env["kind"]: {p["name"]: p["version"] for p in env["packages"]} for env in resolved["environments"]
    }
    assert envs == {
        "build": {"cmake": "3.30.2"},
        "host": {"numpy": "2.0.2", "python": "3.11.9"},
        "test": {"python": "3.11.9"},
    }


def test_a_missing_package_stops_the_build_before_it_starts_naming_channels_and_fix(
    tmp_path: Path, deps: Path
) -> None:
    recipe(tmp_path / "hello", extra_host=("libfoo >=2",))
    code, _, err = condapipe(
        "build", str(tmp_path / "hello"), "--engine", "rattler-build", "-c", str(deps), cwd=tmp_path
    )
    assert code == 3, err
    last = err.strip().splitlines()[-1]
    assert "nothing was built" in last and "libfoo >=2 (hello-resolve (host))" in last
    assert f"file://{deps} (local, reachable)" in last
    assert "add -c conda-forge" in last  # -c replaced the default: say so
    assert not (tmp_path / ".condapipe" / "steps").exists()  # nothing ran


def test_a_channel_served_over_http_resolves(tmp_path: Path, deps: Path) -> None:
    recipe(tmp_path / "hello")
    with http_channel(deps) as url:
        code, out, err = dry(tmp_path, "-c", url)
    assert code == 0, err
    assert f"{url} (remote, reachable)" in out
    assert "host env (2 packages): numpy 2.0.2, python 3.11.9" in out


def test_an_unreachable_channel_is_reported_as_unreachable_not_as_not_found(
    tmp_path: Path, deps: Path
) -> None:
    recipe(tmp_path / "hello", extra_host=("libfoo",))
    closed = closed_port_url()
    code, _, err = dry(tmp_path, "-c", str(deps), "-c", closed)
    assert code == 3
    assert f"channel did not answer: {closed}" in err and "Connection refused" in err
    last = err.strip().splitlines()[-1]
    assert "in none of the channels that answered: libfoo" in last
    assert f"{closed} (remote, unreachable:" in last
    assert "connect this machine to the network" in last and "--offline" in last


def test_a_channel_that_never_answers_fails_fast(
    tmp_path: Path, deps: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe(tmp_path / "hello", extra_host=("libfoo",))
    monkeypatch.setenv("CONDAPIPE_CHANNEL_TIMEOUT", "2")
    with silent_server() as url:
        started = time.monotonic()
        code, _, err = dry(tmp_path, "-c", str(deps), "-c", url)
        seconds = time.monotonic() - started
    assert code == 3
    assert "timed out" in err and f"{url} (remote, unreachable" in err
    assert seconds < 30


def test_a_channel_gets_the_timeout_once_for_all_its_requests_not_once_per_request(
    tmp_path: Path, deps: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network that answers each request just inside the client's timeout must not hold a dry
    run for a multiple of it: the index is several requests, the deadline covers them together."""
    recipe(tmp_path / "hello", extra_host=("libfoo",))
    monkeypatch.setenv("CONDAPIPE_CHANNEL_TIMEOUT", "2")
    with slow_server(delay=1.5) as (url, asked):
        code, _, err = dry(tmp_path, "-c", str(deps), "-c", url)
    assert code == 3
    assert f"{url} (remote, unreachable: no answer within 2 s" in err
    assert any(path.endswith("repodata_shards.msgpack.zst") for path in asked)


def test_the_default_conda_forge_offline_names_the_network_and_offline_as_the_fix(tmp_path: Path) -> None:
    recipe(tmp_path / "hello")
    started = time.monotonic()
    code, _, err = dry(tmp_path)
    assert time.monotonic() - started < 30
    assert code == 3
    assert "channel did not answer: https://conda.anaconda.org/conda-forge" in err
    last = err.strip().splitlines()[-1]
    assert "in none of the channels that answered: cmake" in last
    assert "conda.anaconda.org/conda-forge (remote, unreachable" in last
    assert "--offline" in last and "network" in last


def test_an_unreachable_default_that_is_not_needed_is_left_out_with_a_note(
    tmp_path: Path, deps: Path
) -> None:
    # Everything the recipe needs is in the output dir: conda-forge's silence costs nothing.
    make_channel(tmp_path / "channel", PACKAGES)
    recipe(tmp_path / "hello")
    code, out, err = dry(tmp_path)
    assert code == 0, err
    assert "did not answer; not needed" in out


def test_offline_searches_local_channels_only(tmp_path: Path, deps: Path) -> None:
    recipe(tmp_path / "hello")
    code, out, err = dry(tmp_path, "--offline", "-c", str(deps), "-c", closed_port_url())
    assert code == 0, err
    assert "conda-forge" not in out and "127.0.0.1" not in out
    recipe(tmp_path / "other", extra_host=("libfoo",))
    code, _, err = condapipe("build", str(tmp_path / "other"), "--offline", "--dry-run", cwd=tmp_path)
    assert code == 3
    last = err.strip().splitlines()[-1]
    assert "in none of the channels searched: " in last and "libfoo (hello-resolve (host))" in last
    assert "drop --offline to search conda-forge too (needs the network)" in last


def test_a_magma_build_names_its_build_tools_and_the_wheels_fix(tmp_path: Path) -> None:
    code, out, err = condapipe(
        "build", "magma", "--cuda", "13.0", "--arch", "9.0", "--offline", "--dry-run", cwd=tmp_path
    )
    assert code == 3
    assert "missing: cmake, ninja — fix: --build-tools wheels" in err
    assert "source http://icl.utk.edu/projectsfiles/magma/downloads/magma-2.6.1.tar.gz (sha256 " in out


def test_the_wheels_tool_channel_resolves_magma_offline(tmp_path: Path) -> None:
    pytest.importorskip("cmake")
    pytest.importorskip("ninja")
    _, out, err = condapipe(
        "build", "magma", "--cuda", "13.0", "--arch", "9.0", "--offline", "--build-tools", "wheels",
        "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert "missing:" not in err, err
    assert "(built by this plan)" not in out or "cmake" in out
    assert "build env (2 packages): cmake " in out and "ninja " in out


def test_a_pytorch_variant_without_its_magma_says_build_magma_first(tmp_path: Path, deps: Path) -> None:
    code, _, err = condapipe(
        "build", "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.11",
        "--variant", "pytorch-2.4.1-py3.11-cuda12.4", "--offline", "-c", str(deps), "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert code == 3
    assert "missing: magma-cuda124 — fix: build magma first" in err


def test_config_channels_replace_the_default_and_c_replaces_them(tmp_path: Path, deps: Path) -> None:
    recipe(tmp_path / "hello")
    (tmp_path / "condapipe.toml").write_text(f'channels = ["{deps.name}"]\n')
    (tmp_path / deps.name).symlink_to(deps)  # a directory relative to the config file
    code, out, err = dry(tmp_path)
    assert code == 0, err
    assert f"file://{tmp_path / deps.name}" in out and "conda-forge" not in out
    code, out, err = dry(tmp_path, "-c", str(tmp_path / "nowhere"))
    assert code == 3
    # neither the default nor the config file's channel was searched; the fix says how to add it
    assert "conda.anaconda.org" not in err and f"{tmp_path / deps.name}" not in err
    assert "add -c conda-forge" in err


PYTORCH_DEPS = (
    Pkg("cmake", "3.30.2"),
    Pkg("ninja", "1.12.1"),
    Pkg("python", "3.11.9"),
    Pkg("numpy", "2.0.0", ("python >=3.11,<3.12.0a0",)),
    Pkg("setuptools", "75.1.0", subdir="noarch"),
    Pkg("typing_extensions", "4.12.2", subdir="noarch"),
    Pkg("pyyaml", "6.0.2"),
    Pkg("six", "1.16.0", subdir="noarch"),
    Pkg("mkl", "2020.2.256"),
    Pkg("mkl-devel", "2020.2.256", ("mkl 2020.2.256",)),
)


def test_pytorchs_host_env_solves_against_the_magma_this_plan_builds(tmp_path: Path) -> None:
    deps = make_channel(tmp_path / "deps", PYTORCH_DEPS)
    code, out, err = condapipe(
        "build", "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.11",
        "-c", str(deps), "--no-test", "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert "dependencies do not resolve" not in err, err
    assert code == (3 if "doctor: block:" in err else 0)  # this machine may lack CUDA 12.4
    assert (
        "magma-cuda124-2.6.1: source http://icl.utk.edu/projectsfiles/magma/downloads/magma-2.6.1.tar.gz"
        in out
    )
    assert "    build env (2 packages): cmake 3.30.2, ninja 1.12.1" in out
    assert "pytorch-2.4.1-py3.11-cuda12.4: source git https://github.com/pytorch/pytorch.git at v2.4.1" in out
    assert (
        "    host env (10 packages): magma-cuda124 2.6.1 (built by this plan), mkl 2020.2.256, ninja 1.12.1, "
        "numpy 2.0.0, python 3.11.9" in out
    )


def test_a_recipe_dir_build_takes_python_from_the_config_file_as_from_the_flag(
    tmp_path: Path, deps: Path
) -> None:
    # condapipe.toml's python applies to a recipe directory as --python does (the settings cascade)
    recipe(tmp_path / "hello")
    code, flagged, err = dry(tmp_path, "-c", str(deps), "--python", "3.12")
    assert code == 0, err
    assert "host env (2 packages): numpy 2.1.0, python 3.12.4" in flagged
    (tmp_path / "condapipe.toml").write_text('python = ["3.12"]\n')
    code, configured, err = dry(tmp_path, "-c", str(deps))
    assert code == 0, err
    assert "host env (2 packages): numpy 2.1.0, python 3.12.4" in configured


TORCHVISION_DEPS = (
    Pkg("cmake", "3.30.2"),
    Pkg("ninja", "1.12.1"),
    Pkg("python", "3.11.9"),
    Pkg("numpy", "2.0.1", ("python >=3.11,<3.12.0a0",)),
    Pkg("setuptools", "75.8.0", subdir="noarch"),
    Pkg("typing_extensions", "4.12.2", subdir="noarch"),
    Pkg("pyyaml", "6.0.2"),
    Pkg("six", "1.17.0", subdir="noarch"),
    Pkg("pip", "24.3.1", subdir="noarch"),
    Pkg("mkl", "2020.2.256"),
    Pkg("mkl-devel", "2020.2.256", ("mkl 2020.2.256",)),
    Pkg("libpng", "1.6.39"),
    Pkg("libjpeg-turbo", "2.1.5"),
    Pkg("libwebp-base", "1.2.4"),
    # pytorch's run requirements, which its planned package brings into torchvision's host env
    Pkg("libgomp", "14.2.0"),
    *(
        Pkg(name, version, subdir="noarch")
        for name, version in (
            ("sympy", "1.13.1"),
            ("filelock", "3.16.1"),
            ("networkx", "3.4.2"),
            ("jinja2", "3.1.5"),
            ("fsspec", "2024.12.0"),
        )
    ),
)


def test_torchvisions_host_env_solves_against_the_pytorch_this_plan_builds(tmp_path: Path) -> None:
    """`--with torchvision` pins pytorch's own build string, which has dots (py3.11_cpu_0): the
    pin must reach the solver as conda reads it, not as a refused spec (an internal error once)."""
    deps = make_channel(tmp_path / "deps", TORCHVISION_DEPS)
    for name, version in (("vision", "0.21.0"), ("torch", "2.6.0")):  # offline: both sources are folders
        (tmp_path / name).mkdir()
        (tmp_path / name / "version.txt").write_text(f"{version}\n")
    (tmp_path / "condapipe.toml").write_text(f'[packages.torchvision]\nsource = "{tmp_path / "vision"}"\n')
    # --force: a machine with little free disk must not stop the dry run before the solve
    code, out, err = condapipe(
        "build", "pytorch", "--version", "2.6.0", "--cuda", "cpu", "--python", "3.11",
        "--with", "torchvision", "--source", str(tmp_path / "torch"),
        "--config", str(tmp_path / "condapipe.toml"), "-c", str(deps), "--override-channels", "--no-test",
        "--dry-run", "--json", "--force", cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    envs = json.loads(out)["resolve"]["environments"]
    (host,) = [e for e in envs if e["job"].startswith("torchvision-") and e["kind"] == "host"]
    packages = {p["name"]: (p["version"], p["build"]) for p in host["packages"]}
    assert packages["pytorch"] == ("2.6.0", "py3.11_cpu_0")  # the exact build of this plan
    assert packages["libjpeg-turbo"][0] == "2.1.5" and packages["setuptools"][0] == "75.8.0"

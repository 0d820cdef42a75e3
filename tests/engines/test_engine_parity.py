"""`condapipe build RECIPE_DIR` does what the plain engine does with the same recipe.

Each recipe under tests/data/recipes/parity (both formats) exercises one thing the plain engine
does that condapipe once did differently; it is built for real with the plain engine and with
condapipe, against the same empty local channel, and the outcome (built / skipped / failed) and
the packages (files, modes, index.json) must be the same. tests/engine_parity.py says how each
side is run; tests/engines/test_engine_parity_upstream.py runs the same comparison over the
engines' own test recipes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_parity import (
    BUILT,
    FAILED,
    SKIPPED,
    condapipe_build,
    empty_channel,
    plain_conda_build,
    plain_rattler_build,
)

PARITY = Path(__file__).resolve().parent.parent / "data" / "recipes" / "parity"
EXPECTED = {
    "skip-here": SKIPPED,  # build/skip holds on Linux
    "siblings": BUILT,  # parity-app's run and test requirements name parity-lib, built by the same recipe
    "variant-config": BUILT,  # conda_build_config.yaml next to the recipe, with a [linux] selector
    "declared-leak": BUILT,  # a pip-style direct_url.json naming the work dir, declared intended
    "binary-placeholder": BUILT,  # a prefix the recipe asked to be replaced in binary mode
    "merged-envs": BUILT,  # one prefix for build and host: the script checks $BUILD_PREFIX is $PREFIX
    "virtual-package": BUILT,  # __unix, a run requirement and a variants.yaml key (recipe.yaml only)
    "test-variables": BUILT,  # run_test.py reads conda-build's test variables (meta.yaml only)
    "output-target": BUILT,  # an output with its own target: subdir (meta.yaml only)
}
pytestmark = pytest.mark.slow


def _compare(plain, ours, recipe: str) -> None:
    assert ours.outcome == plain.outcome == EXPECTED[recipe], (
        f"{recipe}: plain {plain.outcome}, condapipe {ours.outcome}\n"
        f"plain: {plain.why}\ncondapipe: {ours.why}"
    )
    assert sorted(ours.packages) == sorted(plain.packages)
    for name, contents in plain.packages.items():
        assert ours.packages[name] == contents, name


@pytest.fixture(scope="module")
def python_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local channel with `python` (this CPython as a venv, `condapipe wheels`) and pip (conda
    adds it to python's dependencies; the wheel this CPython bundles): a python test, offline."""
    import ensurepip

    channel = tmp_path_factory.mktemp("python-channel")
    pip = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))[-1:]
    argv = [str(Path(sys.executable).parent / "condapipe"), "wheels", *map(str, pip), "--to", str(channel)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return channel


@pytest.mark.parametrize("recipe", sorted(r for r in EXPECTED if (PARITY / r / "recipe.yaml").is_file()))
def test_rattler_build_recipes_come_out_as_the_plain_engine_makes_them(recipe: str, tmp_path: Path) -> None:
    deps = empty_channel(tmp_path / "deps")
    plain = plain_rattler_build(PARITY / recipe, tmp_path / "plain", [str(deps)])
    ours = condapipe_build(
        PARITY / recipe, "rattler-build", tmp_path / "channel", tmp_path / "work", [str(deps)]
    )
    _compare(plain, ours, recipe)


@pytest.mark.parametrize("recipe", sorted(r for r in EXPECTED if (PARITY / r / "meta.yaml").is_file()))
def test_conda_build_recipes_come_out_as_the_plain_engine_makes_them(
    recipe: str, real_conda: Path, python_channel: Path, tmp_path: Path
) -> None:
    deps = python_channel if recipe == "test-variables" else empty_channel(tmp_path / "deps")
    plain = plain_conda_build(PARITY / recipe, tmp_path / "plain", [str(deps)], tmp_path / "croot")
    ours = condapipe_build(
        PARITY / recipe, "conda-build", tmp_path / "channel", tmp_path / "work", [str(deps)]
    )
    _compare(plain, ours, recipe)


@pytest.mark.parametrize("engine", ["rattler-build", "conda-build"])
def test_a_skipped_recipe_is_reported_skipped_and_nothing_is_published(
    engine: str, real_conda: Path, tmp_path: Path
) -> None:
    channel = tmp_path / "channel"
    argv = [
        str(Path(sys.executable).parent / "condapipe"),
        "build",
        str(PARITY / "skip-here"),
        "--engine",
        engine,
    ]
    argv += ["--output-dir", str(channel), "--work-dir", str(tmp_path / "work"), "--offline"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the output's name (rattler-build) or the recipe folder's (conda-build --output names none)
    assert re.search(
        r"skipped by the recipe \(build/skip\), nothing published: (parity-)?skip-here", proc.stdout
    )
    assert not [p for p in channel.rglob("*") if p.name.endswith((".conda", ".tar.bz2"))]
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    assert report["ok"] and report["packages"] == [] and report["skipped"]


def test_a_recipe_the_engine_cannot_render_fails_in_one_line_naming_the_file(tmp_path: Path) -> None:
    recipe = PARITY / "render-error"
    plain = plain_rattler_build(recipe, tmp_path / "plain", [str(empty_channel(tmp_path / "deps"))])
    assert plain.outcome == FAILED
    argv = [str(Path(sys.executable).parent / "condapipe"), "build", str(recipe), "--engine", "rattler-build"]
    argv += ["--output-dir", str(tmp_path / "channel"), "--work-dir", str(tmp_path / "work"), "--offline"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert f"cannot render {recipe / 'recipe.yaml'}" in lines[0]
    assert "unknown filter: filter no_such_filter is unknown" in lines[0]
    assert "internal error" not in proc.stderr and "JinjaError {" not in proc.stderr


@pytest.mark.parametrize("engine", ["rattler-build", "conda-build"])
def test_an_undeclared_build_path_is_refused_in_one_line_saying_what_to_do(
    engine: str, real_conda: Path, tmp_path: Path
) -> None:
    """Deliberately stricter than the plain engine, which packs it: a pip-style direct_url.json that
    names the build's work folder points nowhere once installed elsewhere."""
    recipe = PARITY / "undeclared-leak"
    deps = empty_channel(tmp_path / "deps")
    if engine == "conda-build":
        plain = plain_conda_build(recipe, tmp_path / "plain", [str(deps)], tmp_path / "croot")
    else:
        plain = plain_rattler_build(recipe, tmp_path / "plain", [str(deps)])
    assert plain.outcome == BUILT
    ours = condapipe_build(recipe, engine, tmp_path / "channel", tmp_path / "work", [str(deps)])
    assert ours.outcome == FAILED and not ours.packages
    error = json.loads((tmp_path / "work" / "report.json").read_text())["error"]
    assert "parity_demo-1.0.dist-info/direct_url.json: mentions the build machine path" in error
    assert "rm $SP_DIR/*.dist-info/direct_url.json" in error
    assert "conda-build: build/ignore_prefix_files; rattler-build: build/prefix_detection/ignore" in error
    assert "\n" not in error


def _info_texts(pkg: Path) -> dict[str, bytes]:
    """Every info/ member of a .conda, by name."""
    import tarfile
    import zipfile

    import zstandard

    found: dict[str, bytes] = {}
    with zipfile.ZipFile(pkg) as zf:
        (name,) = [n for n in zf.namelist() if n.startswith("info-")]
        reader = zstandard.ZstdDecompressor().stream_reader(zf.open(name))
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                if member.isfile():
                    found[member.name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    return found


@pytest.mark.parametrize("engine", ["rattler-build", "conda-build"])
def test_a_published_package_records_no_path_of_condapipes_work_dir(
    engine: str, real_conda: Path, tmp_path: Path
) -> None:
    """The engine searched a staging channel inside the work dir and built in scratch folders there;
    the published package names the user's channel only, and the level its file has."""
    from condapipe.package.io import DEFAULT_ZSTD_LEVEL

    work = tmp_path / "work"
    deps = empty_channel(tmp_path / "deps")
    ours = condapipe_build(PARITY / "variant-config", engine, tmp_path / "channel", work, [str(deps)])
    assert ours.outcome == BUILT, ours.why
    (pkg,) = (tmp_path / "channel").glob("*/*.conda")
    info = _info_texts(pkg)
    leaks = [name for name, data in info.items() if str(work.resolve()).encode() in data]
    # info/paths.json's prefix placeholder is the one exception: conda rewrites it at install
    assert [n for n in leaks if n != "info/paths.json"] == []
    channels = json.loads(info["info/about.json"])["channels"]
    assert [c.rstrip("/") for c in channels] == [
        (tmp_path / "channel").resolve().as_uri(),
        deps.resolve().as_uri(),
    ]
    rendered = info.get("info/recipe/rendered_recipe.yaml", b"").decode()
    if engine == "rattler-build":
        assert f"compression_level: {DEFAULT_ZSTD_LEVEL}" in rendered


@pytest.mark.parametrize("engine", ["rattler-build", "conda-build"])
def test_a_variant_file_given_with_m_reaches_the_engine_as_it_is(
    engine: str, real_conda: Path, tmp_path: Path
) -> None:
    """`-m FILE` on a recipe directory is the engine's -m: read after the recipe's own variant
    file, keys condapipe has no flag for included (a family's -m becomes spec flags instead)."""
    override = tmp_path / "override.yaml"
    override.write_text("parity_flavor:\n  - otter\nan_unrelated_key:\n  - 1\n")
    recipe, deps = PARITY / "variant-config", [str(empty_channel(tmp_path / "deps"))]
    if engine == "conda-build":
        plain = plain_conda_build(
            recipe, tmp_path / "plain", deps, tmp_path / "croot", variant_files=(override,)
        )
    else:
        plain = plain_rattler_build(recipe, tmp_path / "plain", deps, variant_files=(override,))
    ours = condapipe_build(
        recipe, engine, tmp_path / "channel", tmp_path / "work", deps, variant_files=(override,)
    )
    assert ours.outcome == plain.outcome == BUILT, ours.why
    assert sorted(ours.packages) == sorted(plain.packages) == ["parity-variant-config-1.0-otter_0.conda"]

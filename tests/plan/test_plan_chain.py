"""The plan end to end on a two-package chain shaped like magma → pytorch.

libcusmoke is a static CUDA library (nvcc, compile only) that cusmoke-app links at build time
(a host requirement only, as pytorch links magma-cudaXY). The plan builds the library first,
fixes, verifies, tests and publishes it, then builds the app against the channel; the library
is skipped when a channel in use already has it. Real rattler-build builds, real channels,
installs with py-rattler into a fresh prefix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from e2e_helpers import install, run_clean
from plan_helpers import channel_problems

from condapipe.buildspec.settings import spec_from_flags
from condapipe.plan.build_plan import PlanOptions, make_family_plan, make_recipe_plan
from condapipe.plan.runner import describe, run_plan

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH"),
]

CHAIN = Path(__file__).parent.parent / "data" / "plan-chain"
LIB, APP = CHAIN / "libcusmoke", CHAIN / "cusmoke-app"
KINDS = ("build", "fix", "verify", "test", "publish")


def options(base: Path, *channels: str) -> PlanOptions:
    return PlanOptions(
        output_dir=base / "channel", work_dir=base / "work", engine="rattler-build", channels=channels
    )


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    base = tmp_path_factory.mktemp("chain")
    plan = make_recipe_plan([APP], options(base), prerequisites=[LIB])
    return base, run_plan(plan)


def test_the_library_is_published_before_the_app_is_built_against_it(chain: tuple) -> None:
    _, result = chain
    order = [(r.step.id, r.status) for r in result.results]
    assert order == [(f"{k}:libcusmoke", "ran") for k in KINDS] + [(f"{k}:cusmoke-app", "ran") for k in KINDS]
    build = result.plan.step("build:cusmoke-app")
    assert "publish:libcusmoke" in build.needs


def test_the_channel_holds_both_verified_packages(chain: tuple) -> None:
    base, result = chain
    names = sorted(p.name.split("-0.")[0] for p in (base / "channel" / "linux-64").glob("*.conda"))
    assert names == ["cusmoke-app", "libcusmoke"]
    assert channel_problems(base / "channel") == []
    verify = result.records()["verify:cusmoke-app"].data["verify"]
    assert all(r["ok"] for r in verify.values())


def test_the_app_installs_without_the_static_library_and_runs(chain: tuple, tmp_path: Path) -> None:
    base, _ = chain
    prefix = tmp_path / "env"
    names = install(base / "channel", ["cusmoke-app"], prefix, tmp_path / "cache")
    assert names == ["cusmoke-app"]  # libcusmoke was needed at build time only
    proc = run_clean([prefix / "bin" / "cusmoke-app", "--version"])
    assert proc.stdout == "cusmoke-app 0.2.0 (cusmoke 0.1.0)\n"


def test_a_prerequisite_already_in_a_channel_in_use_is_skipped_and_says_where(
    chain: tuple, tmp_path: Path
) -> None:
    base, _ = chain
    first_channel = str((base / "channel").resolve())
    plan = make_recipe_plan([APP], options(tmp_path, first_channel), prerequisites=[LIB])
    rows = {r["id"]: r for r in describe(plan)}
    for kind in KINDS:
        assert rows[f"{kind}:libcusmoke"]["action"] == "skip"
        assert rows[f"{kind}:libcusmoke"]["why"] == f"not needed: libcusmoke 0.1.0 is in {first_channel}"
    assert "publish:libcusmoke" not in plan.step("build:cusmoke-app").needs
    result = run_plan(plan)
    assert [r.step.id for r in result.results if r.status == "ran"] == [f"{k}:cusmoke-app" for k in KINDS]
    assert [p.name.split("-0.")[0] for p in (tmp_path / "channel" / "linux-64").glob("*.conda")] == [
        "cusmoke-app"
    ]


def test_a_dry_run_lists_every_step_with_its_inputs_and_changes_nothing(tmp_path: Path) -> None:
    plan = make_recipe_plan([APP], options(tmp_path), prerequisites=[LIB])
    rows = describe(plan)
    assert [r["id"] for r in rows] == [f"{k}:libcusmoke" for k in KINDS] + [f"{k}:cusmoke-app" for k in KINDS]
    assert rows[0]["why"] == "not done before"
    assert rows[5]["why"] == "runs after publish:libcusmoke"
    assert rows[5]["inputs"]["recipe_dir"] == str(APP.resolve()) and len(rows[5]["inputs"]["recipe"]) == 64
    assert not (tmp_path / "work").exists() and not (tmp_path / "channel").exists()


def test_editing_the_app_source_rebuilds_the_app_but_not_the_library(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    shutil.copytree(CHAIN, recipes)
    lib, app = recipes / "libcusmoke", recipes / "cusmoke-app"
    run_plan(make_recipe_plan([app], options(tmp_path), prerequisites=[lib]))
    main = app / "src" / "main.cu"
    main.write_text(main.read_text().replace("cusmoke-app 0.2.0 (%s)", "cusmoke-app 0.2.0 [%s]"))
    plan = make_recipe_plan([app], options(tmp_path), prerequisites=[lib])
    why = {r["id"]: r["why"] for r in describe(plan)}
    assert why["build:cusmoke-app"] == "inputs changed: recipe"
    assert why["publish:libcusmoke"].startswith("unchanged")
    result = run_plan(plan)
    ran = [r.step.id for r in result.results if r.status == "ran"]
    assert ran == [f"{k}:cusmoke-app" for k in KINDS]
    # Same file name, new contents: the channel's repodata describes (and installs) the new file.
    assert channel_problems(tmp_path / "channel") == []
    prefix = tmp_path / "env"
    install(tmp_path / "channel", ["cusmoke-app"], prefix, tmp_path / "cache")
    assert (
        run_clean([prefix / "bin" / "cusmoke-app", "--version"]).stdout
        == "cusmoke-app 0.2.0 [cusmoke 0.1.0]\n"
    )


@pytest.fixture(scope="module")
def magma_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel holding a (tiny, real) magma-cuda130 package."""
    base = tmp_path_factory.mktemp("magma-channel")
    recipe = base / "recipe"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(
        "package: {name: magma-cuda130, version: 2.6.1}\n"
        "build:\n  number: 1\n  script:\n"
        "    - mkdir -p $PREFIX/include && echo '#define MAGMA_VERSION 261' > $PREFIX/include/magma_v2.h\n"
    )
    run_plan(make_recipe_plan([recipe], PlanOptions(output_dir=base / "channel", work_dir=base / "work")))
    return base / "channel"


def _pytorch_plan(tmp_path: Path, *channels: str):
    spec = spec_from_flags("pytorch", {"version": "2.9.0", "cuda": ("13.0",), "python": ("3.12",)})
    return make_family_plan(spec, options(tmp_path, *channels))


def test_pytorch_plans_magma_for_its_cuda_first_when_no_channel_has_it(tmp_path: Path) -> None:
    plan = _pytorch_plan(tmp_path)
    ids = [s.id for s in plan.steps]
    assert ids[:2] == ["render:magma-cuda130-2.6.1", "build:magma-cuda130-2.6.1"]
    assert "publish:magma-cuda130-2.6.1" in plan.step("build:pytorch-2.9.0-py3.12-cuda13.0").needs


def test_pytorch_skips_magma_when_a_channel_in_use_has_it(tmp_path: Path, magma_channel: Path) -> None:
    plan = _pytorch_plan(tmp_path, str(magma_channel))
    magma = [s for s in plan.steps if s.package == "magma-cuda130-2.6.1"]
    assert magma and all(
        s.skip_reason == f"not needed: magma-cuda130 2.6.1 is in {magma_channel}" for s in magma
    )
    assert plan.step("build:pytorch-2.9.0-py3.12-cuda13.0").needs == ("render:pytorch-2.9.0-py3.12-cuda13.0",)

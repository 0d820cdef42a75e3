"""The writers on hand-built models: conditions, quoting, atomic writes, model mistakes.

Families other than pytorch/magma (cuda-smoke, ...) use render_model() directly, so these
properties must hold for any model, not only for the shipped families.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from render_helpers import load_yaml, v0_meta, v1_render

from condapipe.errors import UsageError
from condapipe.render.model import (
    VARIANT_REF,
    Dep,
    DownPrioritize,
    ExtraFile,
    Patch,
    RecipeModel,
    Requirements,
    Script,
    SourceRef,
    Tests,
    Variants,
    When,
)
from condapipe.render.recipe_dir import MARKER, plan_files, render_model
from condapipe.render.syntax import bash_value, condition_v1, selector_v0


def small_model(**changes: object) -> RecipeModel:
    base = RecipeModel(
        name="demo",
        version="2.10",
        build_number=3,
        source=SourceRef(url="https://example.invalid/demo-{{ demo_version }}.tar.gz", sha256="a" * 64),
        script=Script(env=(("GREETING", "hi {{ flavour }}"),), body='echo "${GREETING}"\n'),
        requirements=Requirements(
            host=(
                Dep("python"),
                Dep("numpy 1.26.*", When(python=">=3.9,<3.13")),
                Dep("mkl", When(platforms=("linux-64",))),
                Dep("openblas", When(platforms=("linux-aarch64",))),
                Dep("cuda-libs", When(cuda=("12.4",))),
            ),
            run=(Dep("python"),),
        ),
        build_string="py{{ python }}_{{ flavour }}_3",
        tests=Tests(commands=("echo {{ flavour }}",)),
        variants=Variants(
            keys=(
                ("python", ("3.8", "3.12")),
                ("cuda_version", ("12.4", "cpu")),
                ("flavour", ("cuda", "plain")),
                ("demo_version", ("1.0", "1.0")),
            ),
            zip_keys=(("cuda_version", "flavour", "demo_version"),),
        ),
        down_prioritize=DownPrioritize("plainfeature", When(cuda=("cpu",))),
    )
    return RecipeModel(**{**base.__dict__, **changes})


def test_conditions_are_spelled_per_format() -> None:
    when = When(platforms=("linux-64", "linux-aarch64"), python=">=3.9,<3.13", cuda=("12.4",))
    assert selector_v0(when) == '(linux64 or aarch64) and py<313 and py>=39 and cuda_version == "12.4"'
    assert condition_v1(when) == (
        "((linux and x86_64) or (linux and aarch64))"
        ' and match(python, ">=3.9,<3.13") and cuda_version == "12.4"'
    )
    assert selector_v0(When()) == "" and condition_v1(When()) == ""


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
)
def test_bash_value_round_trips_any_literal(text: str) -> None:
    assume(not VARIANT_REF.search(text))
    out = subprocess.run(
        ["bash", "-c", f"printf %s {bash_value(text)}"], capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    assert out == text


def test_bash_value_reads_variant_refs_from_the_environment() -> None:
    word = bash_value('a "quoted" $HOME `x` {{ flavour }}!')
    out = subprocess.run(
        ["bash", "-c", f"printf %s {word}"],
        env={"flavour": "cuda"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == 'a "quoted" $HOME `x` cuda!'


def test_both_formats_agree_for_every_variant_and_platform(tmp_path: Path) -> None:
    out = render_model(small_model(), tmp_path / "recipe").out_dir
    for platform in ("linux-64", "linux-aarch64"):
        rendered = v1_render(out, platform)
        assert len(rendered) == 4
        for variant_out in rendered:
            variant = {k: str(v) for k, v in variant_out.variant.items() if k != "target_platform"}
            variant.setdefault("demo_version", "1.0")
            meta = v0_meta(out, platform, variant)
            recipe = variant_out.recipe.to_dict()
            assert recipe["requirements"]["host"] == meta["requirements"]["host"]
            assert recipe["build"]["string"] == meta["build"]["string"]
            assert str(recipe["package"]["version"]) == meta["package"]["version"] == "2.10"
            cpu = variant["cuda_version"] == "cpu"
            assert recipe["build"]["variant"]["down_prioritize_variant"] == (1 if cpu else 0)
            assert meta["build"].get("track_features") == (["plainfeature"] if cpu else None)
            py312 = variant["python"] == "3.12"
            assert ("numpy 1.26.*" in meta["requirements"]["host"]) is py312
            assert ("mkl" in meta["requirements"]["host"]) is (platform == "linux-64")
            assert ("cuda-libs" in meta["requirements"]["host"]) is (not cpu)


def test_version_stays_a_string_in_both_formats(tmp_path: Path) -> None:
    out = render_model(small_model(), tmp_path / "recipe").out_dir
    assert load_yaml((out / "recipe.yaml").read_text())["package"]["version"] == "2.10"
    assert '  version: "2.10"' in (out / "meta.yaml").read_text()


def test_patches_and_extra_files_are_copied(tmp_path: Path) -> None:
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a/x\n+++ b/x\n")
    model = small_model(
        source=SourceRef(
            git_url="https://example.invalid/x.git", git_rev="v1", patches=(Patch("fix.patch", patch),)
        ),
        extra_files=(ExtraFile("activate.sh", text="export X=1\n"),),
    )
    out = render_model(model, tmp_path / "recipe").out_dir
    assert (out / "fix.patch").read_bytes() == patch.read_bytes()
    assert (out / "activate.sh").read_text() == "export X=1\n"
    assert set(load_yaml((out / MARKER).read_text())["files"]) >= {"fix.patch", "activate.sh", "meta.yaml"}


def test_undefined_variant_ref_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="flavor"):
        plan_files(small_model(build_string="py{{ python }}_{{ flavor }}_3"))


def test_failed_render_leaves_no_output_and_keeps_the_previous_render(tmp_path: Path) -> None:
    out = tmp_path / "recipe"
    render_model(small_model(), out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    missing = Patch("gone.patch", tmp_path / "does-not-exist.patch")
    broken = small_model(source=SourceRef(path=tmp_path, patches=(missing,)))
    with pytest.raises(UsageError, match="cannot read"):
        render_model(broken, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipe"], "temporary dirs left behind"

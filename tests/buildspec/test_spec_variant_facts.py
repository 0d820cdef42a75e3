"""One resolved variant: what the spec decides about a CUDA variant is what the rendered recipes say.

`condapipe config show` prints the spec and `condapipe render` writes the recipes; both must agree on
every CUDA fact (BUILD_SPLIT_CUDA, static cuDNN, nvcc flags, magma package, run constraint), and the
arch list each package promises is recorded in the recipe for verify to read back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from render_helpers import load_yaml, run_cli

from condapipe.buildspec.settings import spec_from_flags
from condapipe.facts.arch import magma_default_archs, parse_arch_list, torch_default_archs
from condapipe.facts.families import family_of_package
from condapipe.facts.promise import package_promise, promised_archs

# 12 archs + 1 PTX = 13 code images on CUDA 10.2 (which by itself does not split): too many for one
# libtorch_cuda.so, and pytorch 1.8 has BUILD_SPLIT_CUDA, so the spec turns the split on.
LONG_1_8 = "3.0;3.5;3.7;5.0;5.2;5.3;6.0;6.1;6.2;7.0;7.2;7.5+PTX"
SPLIT_CASE = ("pytorch", "--version", "1.8.0", "--cuda", "10.2", "--python", "3.8", "--arch", LONG_1_8)
# 10 archs + 1 PTX = 11 images on a series without the split: a warning, and the split stays off.
LONG_2_4 = "5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0+PTX;9.0a"
WARN_CASE = ("pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.10", "--arch", LONG_2_4)


@pytest.fixture(autouse=True)
def _no_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def config_show(*args: str) -> dict:
    result = run_cli("config", "show", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["spec"]


def render(tmp_path: Path, *args: str) -> tuple[Path, str]:
    out = tmp_path / "recipe"
    result = run_cli("render", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return out, result.stderr


def matrices(out: Path) -> dict[str, dict]:
    """The variant matrix of each format: conda_build_config.yaml (v0) and variants.yaml (v1)."""
    return {
        name: load_yaml((out / name).read_text()) for name in ("conda_build_config.yaml", "variants.yaml")
    }


def test_a_long_arch_list_turns_the_split_on_in_the_spec_and_in_both_recipes(tmp_path: Path) -> None:
    (variant,) = config_show(*SPLIT_CASE)["cuda_variants"]
    assert variant["build_split_cuda"] is True
    assert variant["link_overflow_warning"] is None  # the split avoids the 2 GB link, nothing to warn
    out, stderr = render(tmp_path, *SPLIT_CASE)
    for name, matrix in matrices(out).items():
        assert matrix["build_split_cuda"] == ["ON"], name
        assert matrix["torch_cuda_arch_list"] == [LONG_1_8], name
    assert "relocation truncated" not in stderr


def test_where_the_split_is_unavailable_spec_render_and_the_user_see_the_same_warning(tmp_path: Path) -> None:
    spec = config_show(*WARN_CASE)
    (variant,) = spec["cuda_variants"]
    assert variant["build_split_cuda"] is False
    assert "relocation truncated to fit" in variant["link_overflow_warning"]
    assert variant["link_overflow_warning"] in spec["warnings"]
    out, stderr = render(tmp_path, *WARN_CASE)
    for name, matrix in matrices(out).items():
        assert matrix["build_split_cuda"] == ["OFF"], name
    assert f"warning: {variant['link_overflow_warning']}" in stderr


@pytest.mark.parametrize(
    "args",
    [
        ("pytorch", "--version", "1.8.0", "--cuda", "11.0", "--python", "3.8"),
        (
            "pytorch",
            "--version",
            "2.4.1",
            "--python",
            "3.10",
            "--cuda",
            "11.8",
            "--cuda",
            "12.4",
            "--cuda",
            "cpu",
        ),
        ("pytorch", "--jetson", "tx2"),
        ("libtorch", "--version", "2.4.1", "--cuda", "12.4"),
    ],
)
def test_every_cuda_fact_in_the_recipe_is_the_specs(tmp_path: Path, args: tuple[str, ...]) -> None:
    spec = spec_from_flags(args[0], _params(args[1:]))
    out, _ = render(tmp_path, *args)
    for name, matrix in matrices(out).items():
        rows = {cuda: i for i, cuda in enumerate(matrix["cuda_version"])}
        for v in spec.cuda_variants:
            if v.is_cpu:
                continue
            i = rows[v.cuda]
            assert matrix["torch_cuda_arch_list"][i] == v.archs.torch_arch_list(), name
            assert matrix["torch_nvcc_flags"][i] == " ".join(v.nvcc_flags), name
            assert matrix["build_split_cuda"][i] == ("ON" if v.build_split_cuda else "OFF"), name
            assert matrix["use_static_cudnn"][i] == ("1" if v.static_cudnn else "0"), name
            assert matrix["cudnn_version"][i] == v.cudnn, name
            if "magma_package" in matrix:
                assert matrix["magma_package"][i] == v.magma.package, name
            if "cuda_run_constraint" in matrix:
                assert matrix["cuda_run_constraint"][i] == v.run_constraint, name


def _params(flags: tuple[str, ...]) -> dict:
    params: dict = {"config": None}
    for key, value in zip(flags[::2], flags[1::2], strict=True):
        name = key.lstrip("-")
        if name in ("python", "cuda"):
            params[name] = (*params.get(name, ()), value)
        else:
            params[name] = value
    return params


def test_a_jetson_build_links_jetpacks_dynamic_cudnn_by_the_specs_decision() -> None:
    (variant,) = spec_from_flags("pytorch", {"config": None, "jetson": "tx2"}).cuda_variants
    assert not variant.static_cudnn


def test_magma_packages_promise_magmas_list_and_pytorch_packages_torchs() -> None:
    assert family_of_package("magma-cuda118") == "magma"
    assert family_of_package("pytorch") == "pytorch"
    assert family_of_package("some-other-lib") is None
    assert promised_archs("magma", "11.8") == magma_default_archs("11.8")
    assert promised_archs("pytorch", "11.8") == torch_default_archs("11.8")
    assert promised_archs("magma", "11.8") != promised_archs("pytorch", "11.8")
    assert not promised_archs("magma", "12.9").ptx()  # magma ships SASS only, even where torch has PTX
    assert promised_archs(None, "12.4") == torch_default_archs("12.4")


@pytest.mark.parametrize(
    ("args", "cuda", "archs"),
    [
        (("cuda-smoke", "--cuda", "13.0", "--arch", "8.0;9.0+PTX"), "13.0", "8.0;9.0+PTX"),
        (("magma", "--cuda", "11.8"), "11.8", "3.7;5.0;6.0;7.0;8.0;8.6;9.0"),
        (SPLIT_CASE, "10.2", LONG_1_8),
    ],
)
def test_each_recipe_records_the_promise_both_engines_copy_into_about_json(
    tmp_path: Path, args: tuple[str, ...], cuda: str, archs: str
) -> None:
    out, _ = render(tmp_path, *args)
    v0 = load_yaml((out / "meta.yaml").read_text())["extra"]
    v1 = load_yaml((out / "recipe.yaml").read_text())["extra"]
    assert v0 == v1 == {"condapipe": {"cuda": cuda, "cuda_archs": archs}}
    promise = package_promise("whatever", {"extra": v1})
    assert promise.archs == parse_arch_list(archs)


def test_a_matrix_records_each_packages_own_values_through_its_variant_keys(tmp_path: Path) -> None:
    out, _ = render(
        tmp_path, "pytorch", "--version", "2.4.1", "--python", "3.10", "--cuda", "11.8", "--cuda", "cpu"
    )
    assert load_yaml((out / "recipe.yaml").read_text())["extra"]["condapipe"] == {
        "cuda": "${{ cuda_version }}",
        "cuda_archs": "${{ torch_cuda_arch_list }}",
    }
    # the CPU package of the matrix records "none": it promises no arch
    assert (
        package_promise("pytorch", {"extra": {"condapipe": {"cuda": "cpu", "cuda_archs": "none"}}}).archs
        is None
    )


def test_magma_cudas_with_different_lists_record_them_through_a_variant_key(tmp_path: Path) -> None:
    out, _ = render(tmp_path, "magma", "--cuda", "11.8", "--cuda", "12.4")
    matrix = load_yaml((out / "variants.yaml").read_text())
    assert matrix["magma_arch_list"] == ["3.7;5.0;6.0;7.0;8.0;8.6;9.0", "5.0;6.0;7.0;8.0;8.6;9.0"]
    assert load_yaml((out / "recipe.yaml").read_text())["extra"]["condapipe"]["cuda_archs"] == (
        "${{ magma_arch_list }}"
    )


def test_a_cpu_only_recipe_promises_nothing(tmp_path: Path) -> None:
    out, _ = render(tmp_path, "pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.11")
    assert "extra" not in load_yaml((out / "recipe.yaml").read_text())

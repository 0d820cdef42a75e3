"""BuildSpec construction: defaults come from the tables, every user mistake is a one-line
UsageError naming the valid choices, and nothing is silently defaulted."""

from __future__ import annotations

import pytest

from condapipe.buildspec.build_spec import build_spec, known_packages, normalize_python
from condapipe.buildspec.settings import spec_from_flags
from condapipe.errors import UsageError


def spec(package, **params):
    return spec_from_flags(package, {"config": None, **params})


def error(package, **params) -> str:
    with pytest.raises(UsageError) as err:
        spec(package, **params)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


@pytest.fixture(autouse=True)
def _no_config_file(tmp_path, monkeypatch):
    """Run in an empty directory so no condapipe.toml / pyproject.toml is picked up."""
    monkeypatch.chdir(tmp_path)


def test_pytorch_1_8_cuda_11_0_uses_the_table_defaults():
    s = spec("pytorch", version="1.8.0", python=("3.8",), cuda=("11.0",))
    assert (s.package, s.version, s.build_number, s.pythons) == ("pytorch", "1.8.0", 0, ("3.8",))
    (v,) = s.cuda_variants
    assert v.cuda == "11.0" and v.cudnn == "8.0.5"
    assert v.archs.torch_arch_list() == "3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0"
    assert v.build_split_cuda and v.static_cudnn
    assert (s.platform, s.blas) == ("linux-64", "mkl")
    assert (s.source.kind, s.source.url, s.source.rev) == (
        "git",
        "https://github.com/pytorch/pytorch.git",
        "v1.8.0",
    )
    # not an upstream pair: the spec says what shows it compiles (conda-forge's 1.8.0 for CUDA 11.0)
    assert any(
        w.startswith("pytorch 1.8.0 was not built upstream for CUDA 11.0") and "conda-forge" in w
        for w in s.warnings
    )


def test_pytorch_2_4_1_cuda_12_8_arch_12_0():
    s = spec("pytorch", version="2.4.1", python=("3.8",), cuda=("12.8",), arch="12.0")
    (v,) = s.cuda_variants
    assert v.archs.torch_arch_list() == "12.0" and v.archs.sass() == {"sm_120"}
    assert not v.build_split_cuda and not v.static_cudnn
    assert dict(s.extra_env) == {"_GLIBCXX_USE_CXX11_ABI": "0"}


def test_several_cudas_and_pythons_give_one_spec_with_a_variant_each():
    s = spec("pytorch", version="2.4.1", python=("3.12", "3.10", "3.10"), cuda=("12.4", "11.8", "cpu"))
    assert s.pythons == ("3.10", "3.12")
    assert s.cudas == ("12.4", "11.8", "cpu")
    same = spec("pytorch", version="2.4.1", python=("3.12,3.10",), cuda=("12.4 11.8", "cpu"))
    assert same == s
    by_cuda = {v.cuda: v for v in s.cuda_variants}
    assert by_cuda["11.8"].archs.torch_arch_list() == "3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"
    assert by_cuda["12.4"].archs.torch_arch_list() == "5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"
    assert by_cuda["cpu"].archs is None and by_cuda["cpu"].cudnn is None and by_cuda["cpu"].is_cpu


def test_one_user_arch_list_is_validated_against_every_cuda():
    s = spec("pytorch", version="2.4.1", python=("3.10",), cuda=("11.8", "12.4"), arch="8.0;9.0+PTX")
    assert {v.archs.torch_arch_list() for v in s.cuda_variants} == {"8.0;9.0+PTX"}
    msg = error("pytorch", version="2.4.1", python=("3.10",), cuda=("11.8", "12.4"), arch="3.7;9.0")
    assert msg.startswith("CUDA 12.4 cannot compile arch 3.7; it accepts: 5.0")


def test_cpu_build_has_no_arch_list():
    s = spec("pytorch", version="2.5.1", python=("3.11",), cuda=("cpu",))
    assert s.cudas == ("cpu",) and s.cuda_variants[0].archs is None
    assert error("pytorch", version="2.5.1", python=("3.11",), cuda=("cpu",), arch="8.0").startswith(
        "cpu builds have no arch list"
    )


def test_long_arch_list_without_build_split_cuda_warns_about_the_2gb_link():
    many = "5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0+PTX;9.0a"  # 10 archs + 1 PTX = 11 images
    s = spec("pytorch", version="2.4.1", python=("3.10",), cuda=("12.4",), arch=many)
    assert any("relocation truncated to fit" in w and "BUILD_SPLIT_CUDA" in w for w in s.warnings)
    # the same list on a series that has BUILD_SPLIT_CUDA turns the split on instead
    s18 = spec(
        "pytorch",
        version="1.8.1",
        python=("3.8",),
        cuda=("11.1",),
        arch="3.5;3.7;5.0;5.2;6.0;6.1;7.0;7.5;8.0;8.6+PTX",
    )
    assert s18.cuda_variants[0].build_split_cuda
    assert not any("relocation" in w for w in s18.warnings)
    short = spec("pytorch", version="2.4.1", python=("3.10",), cuda=("12.4",), arch="8.0;9.0")
    assert not any("relocation" in w for w in short.warnings)


def test_magma_version_and_archs_come_from_the_cuda_table():
    s = spec("magma", cuda=("11.0",))
    assert s.version == "2.5.2" and s.pythons == ()
    assert s.cuda_variants[0].archs.gencode_flags()[0] == "-gencode arch=compute_37,code=sm_37"
    assert s.cuda_variants[0].cudnn is None
    assert s.source.kind == "url" and s.source.url.endswith("magma-2.5.2.tar.gz")
    s128 = spec("magma", cuda=("12.8",))
    assert s128.version == "2.6.1" and s128.source.sha256
    assert s128.cuda_variants[0].archs.sass() == {f"sm_{n}" for n in (50, 60, 70, 80, 86, 90, 100, 120)}


def test_magma_ships_sass_only_and_refuses_cpu_and_python():
    s = spec("magma", cuda=("11.8",), arch="8.0;9.0+PTX")
    assert s.cuda_variants[0].archs.ptx() == frozenset()
    assert any("SASS only" in w for w in s.warnings)
    assert "CUDA package" in error("magma", cuda=("cpu",))
    assert "no Python variants" in error("magma", cuda=("11.8",), python=("3.10",))
    assert error("magma").startswith("magma needs --cuda X.Y; valid: 9.2")


def test_magma_cudas_with_different_magma_versions_need_separate_renders():
    msg = error("magma", cuda=("11.0", "11.8"))
    assert "2.5.2 for 11.0; 2.6.1 for 11.8" in msg and "--version" in msg
    s = spec("magma", cuda=("11.0", "11.8"), version="2.6.1")
    assert s.version == "2.6.1" and any("11.0" in w for w in s.warnings)
    same = spec("magma", cuda=("11.8", "12.4"))
    assert same.version == "2.6.1" and same.cudas == ("11.8", "12.4")


def test_families_without_detailed_rules_validate_what_applies():
    smoke = spec("cuda-smoke", cuda=("13.0",), arch="8.6")
    assert smoke.version == "1.0.0" and smoke.cuda_variants[0].archs.torch_arch_list() == "8.6"
    assert smoke.source.kind == "none"
    assert spec("cuda-smoke", cuda=("12.4",)).cuda_variants[0].archs.torch_arch_list().startswith("5.0")
    assert "CUDA package" in error("cuda-smoke", cuda=("cpu",))
    assert "cannot compile arch 3.5" in error("cuda-smoke", cuda=("13.0",), arch="3.5")
    assert "cuda-smoke" in known_packages() and "pytorch" in known_packages() and "magma" in known_packages()


def test_platform_and_blas_defaults_and_conflicts():
    base = {"version": "2.4.1", "python": ("3.10",), "cuda": ("cpu",)}
    assert spec("pytorch", **base, platform="linux-aarch64").blas == "openblas"
    assert spec("pytorch", **base, blas="openblas").blas == "openblas"
    assert error("pytorch", **base, platform="linux-aarch64", blas="mkl") == (
        "BLAS mkl is not available on linux-aarch64; valid there: openblas"
    )
    assert error("pytorch", **base, platform="osx-arm64") == (
        "unknown platform 'osx-arm64'; valid: linux-64 linux-aarch64"
    )
    assert error("pytorch", **base, blas="atlas") == "unknown BLAS 'atlas'; valid: mkl openblas"


def test_required_inputs_are_never_silently_defaulted():
    assert error("pytorch", python=("3.10",), cuda=("cpu",)).startswith(
        "pytorch needs --version; valid: 1.8.0"
    )
    assert error("pytorch", version="2.4.1", cuda=("cpu",)) == (
        "pytorch needs --python; valid: 3.8 3.9 3.10 3.11 3.12"
    )
    assert error("pytorch", version="2.4.1", python=("3.10",)).startswith("pytorch needs --cuda X.Y or cpu")


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"python": ("3.13",)}, "pytorch 2.4 does not support Python 3.13; valid: 3.8 3.9 3.10 3.11 3.12"),
        ({"python": ("three",)}, "cannot read Python version 'three'; write it like 3.10"),
        ({"cuda": ("12.7",)}, "unknown CUDA version '12.7'; valid: cpu 9.2"),
        ({"cudnn": "eight"}, "cannot read cuDNN version 'eight'; write it like 8.9.2"),
        (
            {"build_number": "-1"},
            "--build-number must be a non-negative integer (at most 2147483647), not '-1'",
        ),
        ({"arch": "sm_99"}, "unknown compute capability 9.9"),
        ({"arch": " "}, "empty --arch"),
        ({"source": "/nonexistent/checkout"}, "--source /nonexistent/checkout: no such directory"),
        ({"env": ("NOEQUALS",)}, "--env expects NAME=VALUE, not 'NOEQUALS'"),
        ({"env": ("1BAD=x",)}, "invalid environment variable name '1BAD'"),
    ],
)
def test_bad_values_are_one_line_errors(params, expected):
    base = {"version": "2.4.1", "python": ("3.10",), "cuda": ("12.4",)}
    assert error("pytorch", **{**base, **params}).startswith(expected)


def test_unknown_package_lists_the_known_ones():
    msg = error("tensorflow", cuda=("12.4",))
    assert msg.startswith("unknown package 'tensorflow'; choose one of") and "pytorch" in msg


def test_source_dir_git_and_url_overrides(tmp_path):
    checkout = tmp_path / "pytorch"
    checkout.mkdir()
    base = {"version": "2.4.1", "python": ("3.10",), "cuda": ("cpu",)}
    s = spec("pytorch", **base, source=str(checkout))
    assert (s.source.kind, s.source.path) == ("path", checkout.resolve())
    g = spec("pytorch", **base, source="git+https://github.com/me/pytorch.git@my-branch")
    assert (g.source.kind, g.source.url, g.source.rev) == (
        "git",
        "https://github.com/me/pytorch.git",
        "my-branch",
    )
    u = spec("pytorch", **base, source="https://example.org/pytorch-2.4.1.tar.gz")
    assert (u.source.kind, u.source.url) == ("url", "https://example.org/pytorch-2.4.1.tar.gz")


def test_user_env_overrides_the_series_env_and_is_sorted():
    s = spec(
        "pytorch", version="2.4.1", python=("3.10",), cuda=("cpu",), env=("_GLIBCXX_USE_CXX11_ABI=1", "A=b")
    )
    assert s.extra_env == (("A", "b"), ("_GLIBCXX_USE_CXX11_ABI", "1"))


def test_same_input_same_spec():
    a = spec("pytorch", version="2.4.1", python=("3.10",), cuda=("12.4", "11.8"), arch="Ampere;Hopper")
    b = spec("pytorch", version="2.4.1", python=("3.10",), cuda=("12.4", "11.8"), arch="Ampere;Hopper")
    assert a == b and a.to_dict() == b.to_dict()


@pytest.mark.parametrize(
    ("text", "expected"), [("3.8", "3.8"), ("38", "3.8"), ("py3.10", "3.10"), ("3.11.4", "3.11")]
)
def test_python_spellings(text, expected):
    assert normalize_python(text) == expected


def test_build_spec_is_usable_without_the_cli():
    s = build_spec("magma", {"cuda": ["12.4"], "build_number": 2})
    assert s.build_number == 2 and s.version == "2.6.1"


def test_link_overflow_warning_function_for_other_commands():
    from condapipe.buildspec.build_spec import link_overflow_warning
    from condapipe.facts.arch import parse_arch_list

    long = parse_arch_list("5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0;9.0a+PTX", cuda="12.4")
    assert "relocation truncated to fit" in link_overflow_warning(long, "12.4", split_available=False)
    assert link_overflow_warning(long, "12.4", split_available=True) is None
    assert link_overflow_warning(parse_arch_list("8.0"), "12.4", split_available=False) is None

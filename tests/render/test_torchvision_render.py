"""The torchvision recipe: built against exactly the pytorch build of the same flags, compiling
exactly its arch list, with the image libraries of the release, and rpaths into torch/lib."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from render_helpers import run_cli, v0_meta

from condapipe.buildspec.build_spec import build_spec
from condapipe.fix.rpath import decide, rules_for
from condapipe.render.families import family_for

SEED = {"cuda": ["12.8"], "python": ["3.8"], "arch": "12.0"}


def model(package: str, version: str, **flags: object):
    return family_for(package).build_model(build_spec(package, {"version": version, **flags}))


def test_host_and_run_pin_the_build_string_of_the_pytorch_package_of_the_same_flags() -> None:
    torch = model("pytorch", "2.4.1", **SEED)
    vision = model("torchvision", "0.19.1", **SEED)
    torch_string = torch.build_string  # py{{ python }}_cuda12.8_cudnn..._0
    assert torch_string is not None and torch_string.endswith("_0")
    pin = f"pytorch ==2.4.1[build={torch_string[:-1]}*]"  # any build number when built alone
    assert pin in [d.spec for d in vision.requirements.host]
    assert pin in [d.spec for d in vision.requirements.run]


def test_built_in_one_plan_the_pin_names_pytorchs_build_number() -> None:
    spec = build_spec("torchvision", {"version": "0.19.1", **SEED})
    pinned = family_for("torchvision").build_model(dataclasses.replace(spec, against=(("pytorch", "3"),)))
    assert any(
        d.spec.startswith("pytorch ==2.4.1[build=py{{ python }}_cuda12.8_") and d.spec.endswith("_3]")
        for d in pinned.requirements.run
    )


def test_cuda_variant_compiles_exactly_the_arch_list_and_records_it() -> None:
    vision = model("torchvision", "0.19.1", **SEED)
    keys = dict(vision.variants.keys)
    assert keys["torch_cuda_arch_list"] == ("12.0",)
    # cpp_extension takes explicit -gencode flags as they are: only sm_120, no other image
    flags = keys["torchvision_nvcc_flags"][0]
    assert flags.split(" -Xfatbin")[0] == "-gencode arch=compute_120,code=sm_120"
    assert dict(dict(vision.extra)["condapipe"]) == {"cuda": "12.8", "cuda_archs": "12.0"}
    run = [d.spec for d in vision.requirements.run]
    assert {"cuda-cudart", "libnvjpeg", "{{ cuda_run_constraint }}"} <= set(run)


def test_ptx_archs_get_a_ptx_image() -> None:
    vision = model("torchvision", "0.19.1", cuda=["12.4"], python=["3.10"], arch="8.6;9.0+PTX")
    flags = dict(vision.variants.keys)["torchvision_nvcc_flags"][0]
    assert "-gencode arch=compute_90,code=compute_90" in flags
    assert "compute_86,code=compute_86" not in flags


def test_webp_only_for_releases_that_read_it() -> None:
    new = [d.spec for d in model("torchvision", "0.21.0", cuda=["cpu"], python=["3.11"]).requirements.host]
    old = [d.spec for d in model("torchvision", "0.19.1", cuda=["cpu"], python=["3.11"]).requirements.host]
    assert {"libpng", "libjpeg-turbo", "libwebp-base"} <= set(new)
    assert {"libpng", "libjpeg-turbo"} <= set(old) and "libwebp-base" not in old
    assert (
        "TORCHVISION_USE_WEBP=1" in model("torchvision", "0.21.0", cuda=["cpu"], python=["3.11"]).script.body
    )


def test_cpu_variant_has_no_cuda_requirements(tmp_path: Path) -> None:
    out = tmp_path / "r"
    result = run_cli(
        "render", "torchvision", "--version", "0.21.0", "--cuda", "cpu", "--python", "3.11", "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    meta = v0_meta(out, "linux-64", {"python": "3.11", "cuda_version": "cpu", "build_tag": "cpu"})
    run = meta["requirements"]["run"]
    assert "pytorch ==2.6.0[build=py3.11_cpu_*]" in run
    assert not [r for r in run if "cuda" in r or "nvjpeg" in r]
    assert meta["build"]["string"] == "py3.11_cpu_0"


@pytest.mark.parametrize("name", ["_C.so", "image.so", "video_reader.so"])
def test_extension_modules_find_libtorch_in_the_environments_torch_lib(name: str) -> None:
    rel = f"lib/python3.8/site-packages/torchvision/{name}"
    decision = decide(rel, "/opt/build/_h_env_placehold/lib", rules_for("torchvision"))
    assert decision.entries == ("$ORIGIN/../torch/lib", "$ORIGIN/../../..")


def test_a_pytorch_package_made_elsewhere_is_pinned_by_its_whole_build_string() -> None:
    spec = build_spec("torchvision", {"version": "0.21.0", "cuda": ["cpu"], "python": ["3.11"]})
    model = family_for("torchvision").build_model(
        dataclasses.replace(spec, against=(("pytorch", "cp311_pypi_wheel_0"),))
    )
    assert "pytorch ==2.6.0[build=cp311_pypi_wheel_0]" in [d.spec for d in model.requirements.host]

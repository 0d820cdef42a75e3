"""A family is its profile: one folder under recipes/ plus one line of recipes/families.yaml.

The profile (recipes/<folder>/family.yaml) holds everything condapipe knows of a family: what spec
validation requires (`spec:`), its rpath rules (`rpath:`), what a plan builds before it
(`prerequisites:`), its upload ranks (`upload_rank:`) and the facts its render builder reads. No
data table holds per-family data, so a new family touches its folder and the registry only; a
throwaway family built here from a profile alone proves it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import needs_system_tool
from ruamel.yaml import YAML

from condapipe.buildspec.settings import spec_from_flags
from condapipe.cli.main import main
from condapipe.elf.reader import read_dynamic
from condapipe.errors import UsageError
from condapipe.facts.families import (
    FamilyRules,
    family_of_package,
    family_rules,
    known_packages,
    profile,
    profiles,
    recipes_root,
)
from condapipe.fix.rpath import DirRule, rules_for
from condapipe.package.io import unpack
from condapipe.plan import code_inputs
from condapipe.plan.build_plan import family_jobs
from condapipe.publish.upload_order import rank, rank_rules
from condapipe.render.families import family_for

RECIPES = Path(str(resources.files("condapipe.recipes")))
DATA = Path(str(resources.files("condapipe.data")))
SECTIONS = ("spec", "rpath", "prerequisites", "upload_rank")


def load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------ the registered families


def test_every_registered_family_has_a_profile_with_every_section() -> None:
    assert known_packages() == ("cuda-smoke", "libtorch", "magma", "pytorch", "torchvision")
    for family in profiles():
        raw = load(family.path / "family.yaml")
        assert family.path == RECIPES / family.folder
        assert [s for s in SECTIONS if s not in raw] == [], family.name
        assert callable(family_for(family.name).build_model)
        # The render builder reads the facts, never the sections that other stages own.
        assert not set(SECTIONS) & set(family.facts)


def test_no_data_table_holds_per_family_data() -> None:
    assert not (DATA / "spec_families.yaml").exists() and not (DATA / "plan.yaml").exists()
    assert set(load(DATA / "rpath_rules.yaml")) == {"keep_names", "build_prefix_markers"}
    patterns = [r["pattern"] for r in load(DATA / "upload_order.yaml")["ranks"]]
    assert patterns == ["_*", "*-mutex", "*_mutex", "cpuonly", "cudatoolkit*"]
    assert not [(f, p) for f in known_packages() for p in patterns if f in p]


def test_a_folder_without_a_registry_line_is_no_family() -> None:
    # common/ holds shared templates; only recipes/families.yaml makes a family.
    assert (RECIPES / "common").is_dir() and "common" not in known_packages()
    with pytest.raises(UsageError, match="unknown package 'common'"):
        family_rules("common")


def test_the_spec_rules_are_what_they_were() -> None:
    torch_git = (("kind", "git"), ("rev", "v{version}"), ("url", "https://github.com/pytorch/pytorch.git"))
    pytorch = FamilyRules(
        "pytorch", "required", "required", True, True, "torch", True, True, True, torch_git, ("pytorch",)
    )
    assert family_rules("pytorch") == pytorch
    assert family_rules("libtorch") == FamilyRules(
        "pytorch", "none", "required", True, True, "torch", True, True, True, torch_git, ("libtorch",)
    )
    assert family_rules("magma") == FamilyRules(
        "magma",
        "none",
        "required",
        False,
        False,
        "magma",
        False,
        False,
        False,
        (("kind", "magma"),),
        ("magma-cuda*",),
    )
    assert family_rules("cuda-smoke") == FamilyRules(
        "1.0.0",
        "none",
        "required",
        False,
        False,
        "torch",
        True,
        False,
        False,
        (("kind", "none"),),
        ("cuda-smoke",),
    )
    assert family_of_package("magma-cuda118") == "magma"


def test_every_family_has_its_own_rpath_rules_and_none_falls_back_to_the_default() -> None:
    torch = rules_for("pytorch")
    assert torch.dirs == (
        DirRule("lib/python*/site-packages/torch/*.so*", ("$ORIGIN", "$ORIGIN/lib", "$ORIGIN/../../..")),
        DirRule("lib/python*/site-packages/torch/lib/*.so*", ("$ORIGIN", "$ORIGIN/../../../..")),
    )
    assert torch.vendor_dir == "lib/python*/site-packages/torch/lib"
    for name in ("libtorch", "magma", "cuda-smoke"):
        rules = rules_for(name)
        assert rules.family == name  # its own entry, not the default's
        assert (rules.extra_rpaths, rules.dirs, rules.vendor_dir) == (("lib",), (), "lib")
    assert rules_for(None).family == rules_for("not-a-family").family == "default"
    assert rules_for("magma").keep_names == ("libcudnn*", "libnvrtc-builtins*")


def test_the_upload_rank_order_is_what_it_was() -> None:
    assert [(r.pattern, r.rank) for r in rank_rules()] == [
        ("_*", 0),
        ("*-mutex", 0),
        ("*_mutex", 0),
        ("cpuonly", 5),
        ("cudatoolkit*", 8),
        ("magma*", 10),
        ("libtorch*", 20),
        ("pytorch", 30),
        ("pytorch-*", 35),
        ("torch*", 40),
        ("torchvision", 40),
    ]
    assert profile("torchvision").upload_ranks == (("torchvision", 40),) and rank("torchvision") == 40
    assert profile("magma").upload_ranks == (("magma*", 10),)
    assert profile("cuda-smoke").upload_ranks == () and rank("cuda-smoke") == 50


def test_the_prerequisites_come_from_the_profiles() -> None:
    assert {f.name: f.prerequisites for f in profiles()} == {
        "pytorch": ("magma",),
        "libtorch": ("magma",),
        "magma": (),
        "cuda-smoke": (),
        "torchvision": (),  # its pytorch comes from a channel, or from `build pytorch --with torchvision`
    }


# ------------------------------------------------------------------ a throwaway family

HELLO_PROFILE = """\
# hello-cuda: a throwaway family made of this folder and one registry line.
summary: One CUDA kernel behind a shared library and a CLI
license: BSD-3-Clause
requirements: {build: [], host: [], run: []}
test_commands: ["hello-cuda"]
passthrough: [CC, NVCC_APPEND_FLAGS]
missing_dso_allowlist: ["libcuda.so*"]
spec:
  version: "0.1.0"
  python: none
  cuda: required
  cpu_allowed: false
  package_names: ["hello-cuda*"]
rpath:
  extra_rpaths: ["lib"]
  dirs:
    - {glob: "lib/hello/*.so*", rpath: ["$ORIGIN"]}
  vendor_dir: "lib/hello"
prerequisites: {prerequisites}
upload_rank:
  - {pattern: "hello-*", rank: 45, why: "after the pytorch family"}
"""

HELLO_BUILD = """\
read -r -a gencode <<< "${cuda_gencode}"
mkdir -p "${PREFIX}/bin" "${PREFIX}/lib/hello"
nvcc -O2 "${gencode[@]}" -Xcompiler -fPIC -shared -Xlinker -soname=libhello.so \\
    -o "${PREFIX}/lib/hello/libhello.so" hello.cu
"${CC:-gcc}" -O2 -o "${PREFIX}/bin/hello-cuda" main.c \\
    -L"${PREFIX}/lib/hello" -lhello -Wl,-rpath,"${PREFIX}/lib/hello"
"""

HELLO_CU = """\
#include <cuda_runtime.h>
__global__ void add_one(int *x) { *x += 1; }
extern "C" int hello_run(void) {
    int count = 0, *d = nullptr, h = 41;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return -1;
    cudaMalloc(&d, sizeof h);
    cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice);
    add_one<<<1, 1>>>(d);
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    return h;
}
"""

HELLO_MAIN = """\
#include <stdio.h>
int hello_run(void);
int main(void) {
    int r = hello_run();
    if (r < 0) { printf("hello-cuda: no GPU\\n"); return 0; }
    printf("hello-cuda: %d\\n", r);
    return r == 42 ? 0 : 1;
}
"""


def make_recipes(tmp_path: Path, *, prerequisites: str = "[]") -> Path:
    """A copy of the installed recipes/ plus the hello-cuda folder and its one registry line."""
    root = tmp_path / "recipes"
    shutil.copytree(RECIPES, root, ignore=shutil.ignore_patterns("__pycache__"))
    folder = root / "hello-cuda"
    (folder / "src").mkdir(parents=True)
    (folder / "family.yaml").write_text(HELLO_PROFILE.replace("{prerequisites}", prerequisites))
    (folder / "build.sh").write_text(HELLO_BUILD)
    (folder / "src" / "hello.cu").write_text(HELLO_CU)
    (folder / "src" / "main.c").write_text(HELLO_MAIN)
    with (root / "families.yaml").open("a") as registry:
        registry.write("  hello-cuda: {folder: hello-cuda, model: script}\n")
    return root


@pytest.fixture
def hello(tmp_path: Path) -> Iterator[Path]:
    with recipes_root(make_recipes(tmp_path, prerequisites="[cuda-smoke]")) as root:
        yield root


def test_a_family_made_of_a_profile_folder_and_a_registry_line_exists(hello: Path) -> None:
    assert "hello-cuda" in known_packages()
    rules = family_rules("hello-cuda")
    assert (rules.version, rules.cpu_allowed, rules.package_names) == ("0.1.0", False, ("hello-cuda*",))
    assert rules.arch_default == "torch" and rules.source == (("kind", "none"),)  # registry defaults
    assert family_of_package("hello-cuda") == "hello-cuda"
    hello_rules = rules_for("hello-cuda")
    assert hello_rules.family == "hello-cuda" and hello_rules.vendor_dir == "lib/hello"
    assert hello_rules.dirs == (DirRule("lib/hello/*.so*", ("$ORIGIN",)),)
    assert rank("hello-cuda") == 45 and [r.rank for r in rank_rules()][-2:] == [40, 45]
    assert family_for("hello-cuda").__name__ == "condapipe.render.families.script"


def test_the_throwaway_family_is_known_only_inside_its_recipes_root(hello: Path) -> None:
    with recipes_root(RECIPES):
        assert "hello-cuda" not in known_packages() and rank("hello-cuda") == 50
    assert "hello-cuda" in known_packages()


def test_condapipe_render_writes_its_recipe_from_the_profile_alone(hello: Path, tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    result = CliRunner().invoke(
        main, ["render", "hello-cuda", "--cuda", "13.0", "--arch", "8.0;9.0+PTX", "-o", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        ".condapipe-render.json",
        "build.sh",
        "conda_build_config.yaml",
        "meta.yaml",
        "recipe.yaml",
        "src/hello.cu",
        "src/main.c",
        "variants.yaml",
    ]
    recipe = load(out / "recipe.yaml")
    assert recipe["package"] == {"name": "hello-cuda", "version": "0.1.0"}
    assert recipe["source"] == {"path": "src"}
    assert recipe["about"]["summary"] == "One CUDA kernel behind a shared library and a CLI"
    variants = load(out / "variants.yaml")
    assert variants["cuda_version"] == ["13.0"] and variants["cuda_arch_list"] == ["8.0;9.0+PTX"]
    assert "-gencode arch=compute_90,code=compute_90" in variants["cuda_gencode"][0]
    # the profile's script, then condapipe's fix on the staged prefix with the family's rules
    script = (out / "build.sh").read_text()
    body, staged = script.split("\n# condapipe's fix before the engine packs", 1)
    assert body.endswith(HELLO_BUILD)
    assert '"$CONDAPIPE_STAGED_FIX" --family "hello-cuda"' in staged


def test_a_plan_builds_the_prerequisites_the_profile_names(hello: Path) -> None:
    spec = spec_from_flags("hello-cuda", {"cuda": ("13.0",), "arch": "9.0"})
    jobs = family_jobs(spec)
    assert [(j.label, j.name, j.prerequisite) for j in jobs] == [
        ("cuda-smoke-1.0.0-cuda13.0", "cuda-smoke", True),
        ("hello-cuda-0.1.0-cuda13.0", "hello-cuda", False),
    ]
    assert jobs[1].needs_jobs == ("cuda-smoke-1.0.0-cuda13.0",)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace("prerequisites: []\n", ""), "no prerequisites section"),
        (
            lambda text: text.replace("  cpu_allowed: false\n", "  cpu_alowed: false\n"),
            "unknown keys cpu_alowed",
        ),
        (lambda text: text.replace("prerequisites: []", "prerequisites: [tensorflow]"), "tensorflow"),
    ],
)
def test_a_profile_that_leaves_out_a_section_or_misspells_a_key_is_refused(
    tmp_path: Path, edit, message: str
) -> None:
    root = make_recipes(tmp_path)
    profile_file = root / "hello-cuda" / "family.yaml"
    profile_file.write_text(edit(profile_file.read_text()))
    with recipes_root(root), pytest.raises(UsageError, match=message):
        known_packages()


# ------------------------------------------------------------------ what a profile change re-runs


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    root = tmp_path / "condapipe"
    shutil.copytree(code_inputs.PACKAGE_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("recipes", "patches"):
        shutil.copytree(Path(str(resources.files(f"condapipe.{data}"))), root / data)
    return root


def test_a_changed_profile_refixes_and_reverifies_a_changed_template_only_rerenders(
    package_copy: Path,
) -> None:
    def digests() -> dict[str, str]:
        return {kind: code_inputs.code_digest(kind, package_copy) for kind in ("render", "fix", "verify")}

    before = digests()
    profile_file = package_copy / "recipes" / "pytorch" / "family.yaml"
    profile_file.write_text(profile_file.read_text() + "\n# changed\n")
    after = digests()
    assert all(after[kind] != before[kind] for kind in ("render", "fix", "verify"))
    template = package_copy / "recipes" / "pytorch" / "build.sh.j2"
    template.write_text(template.read_text() + "\n# changed\n")
    last = digests()
    assert last["render"] != after["render"]
    assert (last["fix"], last["verify"]) == (after["fix"], after["verify"])


# ------------------------------------------------------------------ and it builds


@pytest.mark.slow
@needs_system_tool("nvcc", "gcc")
def test_the_throwaway_family_builds_with_rattler_build_and_its_rpath_rules_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    with recipes_root(make_recipes(tmp_path)):
        result = CliRunner().invoke(
            main,
            ["build", "hello-cuda", "--cuda", "13.0", "--arch", "9.0", "--engine", "rattler-build", "--json"],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output[-3000:]
    (package,) = map(Path, json.loads(result.stdout)["packages"])
    assert package.name.startswith("hello-cuda-0.1.0-")
    files = unpack(project / package, tmp_path / "files")

    def rpath(path: Path) -> str | None:
        info = read_dynamic(path)
        return info.rpath or info.runpath

    # `condapipe fix` applied the profile's rules on the staged prefix: lib/hello/*.so gets its dir
    # rule ($ORIGIN) and the profile's extra rpath (lib); the CLI keeps the rpath its link line gave
    # (lib/hello, made relative) and gains the extra one after it. The engine relocated nothing.
    assert rpath(files / "lib" / "hello" / "libhello.so") == "$ORIGIN:$ORIGIN/.."
    assert rpath(files / "bin" / "hello-cuda") == "$ORIGIN/../lib/hello:$ORIGIN/../lib"
    about = json.loads((files / "info" / "about.json").read_text())
    assert about["summary"] == "One CUDA kernel behind a shared library and a CLI"

"""A family is its profile: one folder under recipes/ plus one line of recipes/families.yaml.

The profile (recipes/<folder>/family.yaml) holds everything condapipe knows of a family: what spec
validation requires (`spec:`), its rpath rules (`rpath:`), what a plan builds before it and where
(`prerequisites:`), its upload ranks (`upload_rank:`), what doctor checks a machine against
(`doctor:`, with its measured build costs), the libraries its packages provide (`linkage:`), the
Jetson boards it takes (`jetson_boards:`), the patch catalog entries it applies (`patches:`) and
the facts its render builder reads. No data table holds per-family data, so a new family touches
its folder and the registry only; a throwaway family made here that way is rendered, planned,
checked by doctor and verify, patched, and built.
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
from condapipe.doctor.costs import disk_need
from condapipe.doctor.machine import family_needs
from condapipe.elf.reader import read_dynamic
from condapipe.errors import UsageError
from condapipe.facts import jetson
from condapipe.facts.families import (
    FamilyRules,
    Prerequisite,
    family_of_package,
    family_rules,
    known_packages,
    profile,
    profiles,
    recipes_root,
)
from condapipe.facts.versioning import KINDS, Versioning
from condapipe.fix.rpath import DirRule, rules_for
from condapipe.package.io import unpack
from condapipe.plan import code_inputs
from condapipe.plan.build_plan import family_jobs
from condapipe.publish.upload_order import rank, rank_rules
from condapipe.render.families import family_for
from condapipe.verify.verifier import dependency_libs

RECIPES = Path(str(resources.files("condapipe.recipes")))
DATA = Path(str(resources.files("condapipe.data")))
SECTIONS = ("spec", "rpath", "prerequisites", "upload_rank", "doctor", "linkage", "jetson_boards", "patches")


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
    assert not (DATA / "build_costs.yaml").exists()  # recipes/pytorch/build_costs.yaml
    assert not {"families", "default_family"} & set(load(DATA / "doctor.yaml"))
    assert "families" not in load(DATA / "jetson.yaml")
    assert not set(known_packages()) & set(load(DATA / "linkage.yaml")["dependency_libs"])
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
        KINDS["pytorch"],
        "required",
        "required",
        True,
        True,
        "torch",
        True,
        True,
        True,
        torch_git,
        ("pytorch",),
    )
    assert family_rules("pytorch") == pytorch
    assert family_rules("libtorch") == FamilyRules(
        KINDS["pytorch"], "none", "required", True, True, "torch", True, True, True, torch_git, ("libtorch",)
    )
    assert family_rules("magma") == FamilyRules(
        KINDS["magma"],
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
        Versioning(default="1.0.0"),
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
    assert rules_for(None).family == rules_for("default").family == "default"
    # A misspelt family is refused, never fixed with the default rules.
    with pytest.raises(UsageError, match="unknown package 'not-a-family'"):
        rules_for("not-a-family")
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
    magma = (Prerequisite("magma", ("linux-64",)),)  # magma-cudaXY packages exist for linux-64 only
    assert {f.name: f.prerequisites for f in profiles()} == {
        "pytorch": magma,
        "libtorch": magma,
        "magma": (),
        "cuda-smoke": (),
        "torchvision": (),  # its pytorch comes from a channel, or from `build pytorch --with torchvision`
    }
    assert profile("pytorch").prerequisites_on("linux-aarch64") == ()


def test_the_other_stages_read_their_family_facts_from_the_profiles() -> None:
    # doctor: torch's measured costs for pytorch and libtorch (the same tree), disk_gib for the rest
    assert family_needs("libtorch").build_costs == (RECIPES / "pytorch" / "build_costs.yaml").resolve()
    assert family_needs("magma").build_costs is None and family_needs("magma").min_ram_gib == 4
    assert family_needs("magma").cmake_min == (("", "3.10"),)
    # verify: a dependency on one of condapipe's families provides its libraries
    assert dependency_libs(["magma-cuda126 2.6.1"]) == ("libmagma*.so*",)
    assert "libc10*.so*" in dependency_libs(["pytorch 2.6.0 cuda126*"])
    assert dependency_libs(["cuda-smoke"]) == ()
    # --jetson: the families whose profile takes the board
    assert jetson.families() == ("pytorch", "libtorch", "cuda-smoke")
    assert [p.patches.upstream for p in profiles()] == ["pytorch", "pytorch", "magma", "", "torchvision"]


# ------------------------------------------------------------------ a throwaway family

HELLO_PROFILE = """\
# hello-cuda: a throwaway family made of this folder and one registry line.
summary: One CUDA kernel behind a shared library and a CLI
license: BSD-3-Clause
requirements: {build: [], host: [], run: []}
test_commands: ["hello-cuda"]
passthrough: [CC, NVCC_APPEND_FLAGS]
missing_dso_allowlist: ["libcuda.so*"]
doctor:
  min_ram_gib: 1.5
  disk_gib: {cuda: 0.25, cpu: 0.1}
  build_costs: null
  cmake_min: {}
  cmake4_policy: false
linkage:
  packages: ["hello-cuda*"]
  libraries: ["libhello.so*"]
  static_symbol: null
jetson_boards: [orin]
patches: {upstream: hello, index: patches/index.yaml}
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

HELLO_PATCHES = """\
entries:
  - id: hello-no-gpu-says-so
    package: hello
    kind: patch
    patch: hello/no-gpu-message.patch
    targets: [main.c]
    versions: ">=0.1"
    cuda: ""
    platforms: [linux-64, linux-aarch64]
    reason: "the CLI names the missing GPU plainly"
    upstream: "none: a test's family"
  - id: hello-flavour
    package: hello
    kind: config
    env: {HELLO_FLAVOUR: patched}
    versions: ""
    cuda: ""
    platforms: [linux-64, linux-aarch64]
    reason: "a config entry reaches the build script"
    upstream: "none"
"""

HELLO_PATCH = """\
--- a/main.c
+++ b/main.c
@@ -3,5 +3,5 @@
 int main(void) {
     int r = hello_run();
-    if (r < 0) { printf("hello-cuda: no GPU\\n"); return 0; }
+    if (r < 0) { printf("hello-cuda: no GPU on this machine\\n"); return 0; }
     printf("hello-cuda: %d\\n", r);
     return r == 42 ? 0 : 1;
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
    (folder / "patches" / "hello").mkdir(parents=True)
    (folder / "patches" / "index.yaml").write_text(HELLO_PATCHES)
    (folder / "patches" / "hello" / "no-gpu-message.patch").write_text(HELLO_PATCH)
    with (root / "families.yaml").open("a") as registry:
        registry.write("  hello-cuda: {folder: hello-cuda, model: script}\n")
    return root


@pytest.fixture
def hello(tmp_path: Path) -> Iterator[Path]:
    with recipes_root(
        make_recipes(tmp_path, prerequisites="[{family: cuda-smoke, platforms: [linux-64]}]")
    ) as root:
        yield root


def test_a_family_made_of_a_profile_folder_and_a_registry_line_exists(hello: Path) -> None:
    assert "hello-cuda" in known_packages()
    rules = family_rules("hello-cuda")
    assert (rules.version.default, rules.cpu_allowed, rules.package_names) == (
        "0.1.0",
        False,
        ("hello-cuda*",),
    )
    assert rules.version.kind == "fixed"  # `version: "0.1.0"`: --version, else 0.1.0
    assert rules.arch_default == "torch" and rules.source == (("kind", "none"),)  # registry defaults
    assert family_of_package("hello-cuda") == "hello-cuda"
    hello_rules = rules_for("hello-cuda")
    assert hello_rules.family == "hello-cuda" and hello_rules.vendor_dir == "lib/hello"
    assert hello_rules.dirs == (DirRule("lib/hello/*.so*", ("$ORIGIN",)),)
    assert rank("hello-cuda") == 45 and [r.rank for r in rank_rules()][-2:] == [40, 45]
    assert family_for("hello-cuda").__name__ == "condapipe.render.families.script"
    # doctor, verify and --jetson read the same folder
    spec = spec_from_flags("hello-cuda", {"cuda": ("13.0",), "arch": "9.0"})
    assert family_needs("hello-cuda").min_ram_gib == 1.5
    assert disk_need(spec, family_needs("hello-cuda")).total_gib == 0.25
    assert dependency_libs(["hello-cuda >=0.1"]) == ("libhello.so*",)
    assert "hello-cuda" in jetson.families("orin") and "hello-cuda" not in jetson.families("nano")
    with pytest.raises(UsageError, match="hello-cuda does not build for the nano board; its boards: orin"):
        spec_from_flags("hello-cuda", {"jetson": "nano"})


def test_condapipe_patches_lists_what_the_family_folder_catalogues(hello: Path) -> None:
    result = CliRunner().invoke(main, ["patches", "list", "hello-cuda", "--version", "0.1.0", "--json"])
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)["entries"]
    assert [e["id"] for e in entries] == ["hello-no-gpu-says-so", "hello-flavour"]


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
        "no-gpu-message.patch",
        "recipe.yaml",
        "src/hello.cu",
        "src/main.c",
        "variants.yaml",
    ]
    recipe = load(out / "recipe.yaml")
    assert recipe["package"] == {"name": "hello-cuda", "version": "0.1.0"}
    # the folder's own patch catalog: its patch on the source, its config entry in the script env
    assert recipe["source"] == {"path": "src", "patches": ["no-gpu-message.patch"]}
    assert recipe["about"]["summary"] == "One CUDA kernel behind a shared library and a CLI"
    variants = load(out / "variants.yaml")
    assert variants["cuda_version"] == ["13.0"] and variants["cuda_arch_list"] == ["8.0;9.0+PTX"]
    assert "-gencode arch=compute_90,code=compute_90" in variants["cuda_gencode"][0]
    # the profile's script, then condapipe's fix on the staged prefix with the family's rules
    script = (out / "build.sh").read_text()
    body, staged = script.split("\n# condapipe's fix before the engine packs", 1)
    assert body.endswith(HELLO_BUILD) and 'export HELLO_FLAVOUR="patched"' in body
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
        (
            lambda text: text.replace(
                "prerequisites: []", "prerequisites: [{family: tensorflow, platforms: []}]"
            ),
            "tensorflow",
        ),
        (lambda text: text.replace("prerequisites: []", "prerequisites: [magma]"), "expected a mapping"),
        (
            lambda text: text.replace('version: "0.1.0"', "version: pytorch-ish"),
            r"family.yaml: spec version: 'pytorch-ish' is neither a version kind "
            r"\(required pytorch torchvision magma\) nor a version like 1.0.0",
        ),
        (lambda text: text.replace("jetson_boards: [orin]\n", ""), "no jetson_boards section"),
        (lambda text: text.replace("  cmake4_policy: false\n", ""), "doctor: no cmake4_policy"),
        (lambda text: text.replace("build_costs: null", "build_costs: costs.yaml"), "no file"),
        (lambda text: text.replace("index: patches/index.yaml", "index: nowhere.yaml"), "no file"),
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


def test_a_profile_without_a_section_is_one_line_and_exit_2_at_the_cli(tmp_path: Path) -> None:
    root = make_recipes(tmp_path)
    profile_file = root / "hello-cuda" / "family.yaml"
    text = profile_file.read_text()
    start, end = text.index("doctor:\n"), text.index("linkage:\n")
    profile_file.write_text(text[:start] + text[end:])
    with recipes_root(root):
        for argv in (
            ["doctor", "pytorch", "--cuda", "cpu"],
            ["render", "hello-cuda", "--cuda", "13.0", "-o", str(tmp_path / "out")],
        ):
            result = CliRunner().invoke(main, argv)
            assert result.exit_code == 2, result.output
            (line,) = result.output.strip().splitlines()
            assert line.endswith("hello-cuda/family.yaml: no doctor section (an empty one is {} or [])")


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

"""End to end: `condapipe build cuda-smoke` goes spec -> render -> rattler-build with the real
nvcc (CUDA 13.0, compile only) for two arch lists, and the packages hold exactly those archs.

Without a GPU the packaged CLI says so and (in test mode) exits 0; on a GPU (`-m gpu`) it runs
the kernel and checks its result.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from e2e_helpers import build_json, condapipe, install, run_clean

from condapipe.facts.arch import parse_arch_list
from condapipe.package.io import unpack
from condapipe.verify.verifier import verify_package

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA 13.0) on PATH"),
]

ARCH_LISTS = {"hopper": "9.0", "ampere-hopper-ptx": "8.0;9.0+PTX"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("smoke-project")


@pytest.fixture(scope="module")
def builds(project: Path) -> dict[str, dict]:
    return {
        key: build_json(
            "cuda-smoke", "--cuda", "13.0", "--arch", archs, "--engine", "rattler-build", cwd=project
        )
        for key, archs in ARCH_LISTS.items()
    }


@pytest.fixture(scope="module")
def installed(project: Path, builds: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("smoke-elsewhere") / "env"
    (pkg,) = map(Path, builds["ampere-hopper-ptx"]["packages"])
    build = pkg.name.removesuffix(".conda").rsplit("-", 1)[1]
    install(project / "channel", [f"cuda-smoke ==1.0.0 {build}"], prefix, tmp_path_factory.mktemp("cache"))
    return prefix


@pytest.mark.parametrize("key", sorted(ARCH_LISTS))
def test_the_package_holds_exactly_the_requested_archs(project: Path, builds: dict, key: str) -> None:
    result = builds[key]
    assert (result["engine"], result["mode"]) == ("rattler-build", "family")
    (pkg,) = map(Path, result["packages"])
    archs = parse_arch_list(ARCH_LISTS[key], cuda="13.0")
    report = verify_package(project / pkg, archs=archs)
    assert report.ok, report.errors
    fatbin = report.to_dict()["fatbins"]["lib/libcuda_smoke.so"]
    assert set(fatbin["sass"]) == set(archs.sass())
    assert set(fatbin["ptx"]) == set(archs.ptx())


def test_verify_checks_the_archs_the_package_records_and_rejects_a_false_promise(
    project: Path, builds: dict, tmp_path: Path
) -> None:
    (pkg,) = map(Path, builds["ampere-hopper-ptx"]["packages"])
    report = verify_package(project / pkg)  # no --arch: the list rattler-build put in info/about.json
    assert report.ok, report.errors
    assert (report.archs, report.archs_source) == ("8.0;9.0+PTX", "recorded in the package (CUDA 13.0)")
    # The same package promising an arch its library lacks is refused.
    tree = unpack(project / pkg, tmp_path / "pkg")
    about_file = tree / "info" / "about.json"
    about = json.loads(about_file.read_text())
    about["extra"]["condapipe"]["cuda_archs"] = "8.0;9.0+PTX;10.0"
    about_file.write_text(json.dumps(about))
    errors = verify_package(tree).errors
    assert errors == ["lib/libcuda_smoke.so: missing CUDA archs sm_100 (has sm_80, sm_90, compute_90)"]


def test_two_arch_lists_give_two_distinct_packages_in_one_channel(project: Path, builds: dict) -> None:
    names = {Path(b["packages"][0]).name for b in builds.values()}
    assert len(names) == 2
    repodata = json.loads((project / "channel" / "linux-64" / "repodata.json").read_text())
    assert names <= set(repodata["packages.conda"])


def test_the_recipe_was_rendered_from_the_spec_and_its_tests_ran(project: Path, builds: dict) -> None:
    (recipe,) = (project / ".condapipe" / "recipes").glob("cuda-smoke-*")
    assert {"recipe.yaml", "variants.yaml", "meta.yaml", "build.sh"} <= {p.name for p in recipe.iterdir()}
    log = Path(builds["hopper"]["log"]).read_text()
    assert "-gencode arch=compute_90,code=sm_90" in log
    for result in builds.values():
        (details,) = result["package_details"]
        assert details["tests"].endswith("passed"), details


def test_without_a_gpu_the_cli_says_so_and_exits_0_in_test_mode(installed: Path) -> None:
    proc = run_clean([installed / "bin" / "cuda-smoke", "--allow-no-gpu"])
    assert proc.returncode == 0, proc.stderr
    if "no GPU available" not in proc.stdout:
        pytest.skip("this machine has a GPU: see the gpu-marked test")
    assert "built for archs 8.0;9.0+PTX with CUDA 13.0" in proc.stdout
    # Outside test mode the missing GPU is an error (exit 2), not a silent success.
    assert run_clean([installed / "bin" / "cuda-smoke"]).returncode == 2


def test_build_info_reports_the_arch_list(installed: Path) -> None:
    proc = run_clean([installed / "bin" / "cuda-smoke", "--build-info"])
    assert proc.stdout == "cuda-smoke built with CUDA 13.0 for archs 8.0;9.0+PTX\n"


@pytest.mark.gpu
def test_on_a_gpu_the_kernel_result_is_checked(installed: Path) -> None:
    proc = run_clean([installed / "bin" / "cuda-smoke", "1000000"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("cuda-smoke: OK saxpy on 1000000 elements on ")
    assert "checksum 100000000.0 (expected 100000000.0)" in proc.stdout


def test_a_cpu_build_of_cuda_smoke_is_a_usage_error(project: Path) -> None:
    code, _, err = condapipe("build", "cuda-smoke", "--cuda", "cpu", "--engine", "rattler-build", cwd=project)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_an_arch_nvcc_13_cannot_compile_is_refused_before_building(project: Path) -> None:
    code, _, err = condapipe(
        "build", "cuda-smoke", "--cuda", "13.0", "--arch", "7.0", "--engine", "rattler-build", cwd=project
    )
    assert code == 2
    assert "cannot compile arch 7.0" in err


def test_a_mismatched_nvcc_is_caught_before_and_during_the_build(project: Path) -> None:
    # The doctor preflight refuses (exit 3) ...
    code, _, err = condapipe(
        "build", "cuda-smoke", "--cuda", "12.9", "--arch", "9.0", "--engine", "rattler-build", cwd=project
    )
    assert code == 3
    assert "nvcc on PATH is 13.0" in err.strip().splitlines()[-1]
    # ... and when forced, the recipe's own check stops nvcc 13.0 from producing a package labelled
    # CUDA 12.9: the build fails and the log diagnosis names the cause.
    code, _, err = condapipe(
        "build",
        "cuda-smoke",
        "--cuda",
        "12.9",
        "--arch",
        "9.0",
        "--force",
        "--engine",
        "rattler-build",
        cwd=project,
    )
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: rattler-build failed to build")
    assert "wrong nvcc on PATH" in last and "log: " in last

"""The rendered v0 recipes (meta.yaml + conda_build_config.yaml) as the REAL conda-build reads them.

Every family's golden specs and the seed cells are rendered with `condapipe render`, then rendered
and checked by conda-build 26.7.1 itself (what `conda render` and `conda build --check` run:
tests/conda_render_check.py) against a local channel of stand-in packages with the names, versions
and builds the real channels carry (tests/data/conda-stub-channel.yaml; magma as the CUDA table
numbers it). So a host pin no real package satisfies, a selector or Jinja conda-build reads
differently from our own reading (render_helpers.v0_meta), or a field conda-build refuses fails
here. The run constraints are then solved by the real conda: cudatoolkit 11.0's constraint admits
conda-forge's 11.0.3 and refuses defaults' 11.0.221 (pytorch#51080), as PyTorch's builder pinned it.

Skips, naming how to install it, where this checkout has no real conda-build (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conda_stubs import StubRecord, make_stub_channel, write_stub
from conftest import HOW_TO_GET_CONDA_BUILD, conda_build_venv
from render_helpers import run_cli

from condapipe.facts import tables
from condapipe.package.channel_index import index_channel

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent.parent

# The golden specs of every family on linux-64 (tests/render/test_render_golden.py), then the seed
# cells (tests/render/test_pytorch_real_tree_upstream.py's CELLS that the table allows: 2.6.0 with
# CUDA 13.0 is refused before rendering), then the families the goldens lack.
CASES: dict[str, tuple[str, ...]] = {
    "pytorch-1.8.0-cuda11.0-py3.8": ("pytorch", "--version", "1.8.0", "--cuda", "11.0", "--python", "3.8"),
    "pytorch-1.13.0-cuda11.8-py3.10": (
        "pytorch", "--version", "1.13.0", "--cuda", "11.8", "--python", "3.10",
    ),
    "pytorch-2.4.1-cuda12.8-py3.8-arch12.0": (
        "pytorch", "--version", "2.4.1", "--cuda", "12.8", "--python", "3.8", "--arch", "12.0",
    ),
    "pytorch-2.4.1-cpu-py3.11": ("pytorch", "--version", "2.4.1", "--cuda", "cpu", "--python", "3.11"),
    "pytorch-2.4.1-matrix": (
        "pytorch", "--version", "2.4.1", "--python", "3.8", "--python", "3.10",
        "--cuda", "11.8", "--cuda", "12.4", "--cuda", "cpu",
    ),
    "libtorch-2.4.1-cuda12.4": ("libtorch", "--version", "2.4.1", "--cuda", "12.4"),
    "magma-cuda110": ("magma", "--cuda", "11.0"),
    "magma-cuda118": ("magma", "--cuda", "11.8"),
    "magma-cuda128": ("magma", "--cuda", "12.8"),
    "seed-1.13.1-cuda11.8": ("pytorch", "--version", "1.13.1", "--cuda", "11.8", "--python", "3.10"),
    "seed-2.6.0-cuda12.6": ("pytorch", "--version", "2.6.0", "--cuda", "12.6", "--python", "3.11"),
    "seed-2.6.0-cuda12.8-arch12.0": (
        "pytorch", "--version", "2.6.0", "--cuda", "12.8", "--arch", "12.0", "--python", "3.11",
    ),
    "seed-2.6.0-cpu": ("pytorch", "--version", "2.6.0", "--cuda", "cpu", "--python", "3.11"),
    "libtorch-2.4.1-cpu": ("libtorch", "--version", "2.4.1", "--cuda", "cpu"),
    "cuda-smoke-cuda13.0": ("cuda-smoke", "--cuda", "13.0", "--arch", "8.0;9.0+PTX"),
}  # fmt: skip


def _venv() -> Path:
    venv = conda_build_venv()
    if venv is None:
        pytest.skip(HOW_TO_GET_CONDA_BUILD)
    return venv


def _conda_env(pkgs: Path) -> dict[str, str]:
    """conda's package cache in the test's temp space; the venv's .condarc (rattler solver, no
    default channels) is found by conda itself."""
    return {**os.environ, "CONDA_PKGS_DIRS": str(pkgs)}


@pytest.fixture(scope="module")
def stub_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _venv()
    return make_stub_channel(tmp_path_factory.mktemp("stub-channel") / "channel")


@pytest.fixture(scope="module")
def rendered(stub_channel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each case rendered by condapipe, then by conda-build against the stub channel (one process)."""
    root = tmp_path_factory.mktemp("recipes")
    old = Path.cwd()
    os.chdir(root)  # no condapipe.toml of the caller's
    try:
        for case, args in CASES.items():
            result = run_cli("render", *args, "-o", str(root / case))
            assert result.exit_code == 0, result.output
    finally:
        os.chdir(old)
    proc = subprocess.run(
        [str(_venv() / "bin" / "python"), str(TESTS / "conda_render_check.py"),
         stub_channel.as_uri(), str(tmp_path_factory.mktemp("croot")), *(str(root / c) for c in CASES)],
        capture_output=True, text=True, check=False, env=_conda_env(tmp_path_factory.mktemp("pkgs")),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {Path(line["recipe"]).name: line for line in lines}


@pytest.mark.parametrize("case", list(CASES))
def test_conda_build_renders_and_checks_the_rendered_v0_recipe(rendered: dict[str, dict], case: str) -> None:
    result = rendered[case]
    assert result["ok"], result.get("error") or result
    for out in result["outputs"]:
        assert out["check"] and out["final"], out
        host = out["requirements"].get("host") or []
        if out["name"] == "pytorch" and "cuda" in out["build"]:
            # The host solve found the magma package `condapipe build magma` makes for this CUDA,
            # with the build number the CUDA table gives both (a finalized recipe pins the record).
            cuda = out["build"].split("_cuda")[1].split("_")[0]
            magma = tables.cuda_info(cuda).magma
            assert f"{magma.package} {magma.version} {magma.build_number}" in host, host


def test_the_matrix_gives_conda_build_one_package_per_python_and_cuda(rendered: dict[str, dict]) -> None:
    builds = sorted(o["build"] for o in rendered["pytorch-2.4.1-matrix"]["outputs"])
    tags = ["cpu", *(f"cuda{c}_cudnn{tables.cuda_info(c).cudnn}" for c in ("11.8", "12.4"))]
    assert builds == sorted(f"py{py}_{tag}_0" for py in ("3.8", "3.10") for tag in tags)


def test_conda_build_reads_the_build_numbers_condapipe_renders(rendered: dict[str, dict]) -> None:
    (magma,) = rendered["magma-cuda118"]["outputs"]
    assert (magma["name"], magma["version"], magma["build"], magma["build_number"]) == (
        "magma-cuda118", "2.6.1", "1", 1,
    )  # fmt: skip
    (pytorch,) = rendered["pytorch-1.8.0-cuda11.0-py3.8"]["outputs"]
    assert (pytorch["build"], pytorch["build_number"]) == ("py3.8_cuda11.0_cudnn8.0.5_0", 0)


def test_a_host_pin_no_real_package_satisfies_fails_the_check(stub_channel: Path, tmp_path: Path) -> None:
    """The check can fail: the same recipe against a channel whose numpy is only 1.26 (no 1.19)."""
    channel = tmp_path / "channel"
    write_stub(channel, StubRecord("numpy", "1.26.4"))
    for pkg in (stub_channel / "linux-64").glob("*.conda"):
        if not pkg.name.startswith("numpy-"):
            (channel / "linux-64" / pkg.name).write_bytes(pkg.read_bytes())
    (channel / "noarch").mkdir()
    index_channel(channel)
    recipe = tmp_path / "recipe"
    assert run_cli("render", *CASES["pytorch-1.8.0-cuda11.0-py3.8"], "-o", str(recipe)).exit_code == 0
    proc = subprocess.run(
        [str(_venv() / "bin" / "python"), str(TESTS / "conda_render_check.py"), channel.as_uri(),
         str(tmp_path / "croot"), str(recipe)],
        capture_output=True, text=True, check=False, env=_conda_env(tmp_path / "pkgs"),
    )  # fmt: skip
    (line,) = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert not line["ok"]
    assert line["error"].startswith("ExplainedDependencyNeedsBuildingError: Unsatisfiable dependencies")
    assert "No candidates were found for numpy 1.19.*" in line["error"]


# ---------------------------------------------------------------- run constraints, real versions

MATCH_SCRIPT = """
import json, sys
from conda.models.match_spec import MatchSpec
from conda.models.version import VersionOrder
request = json.load(sys.stdin)
out = {}
for cuda, spec in request["specs"].items():
    ms = MatchSpec(spec)
    out[cuda] = sorted((v for v in request["carried"].get(ms.name, []) if ms.match(
        {"name": ms.name, "version": v, "build": "0", "build_number": 0})), key=VersionOrder)
print(json.dumps(out))
"""


def test_every_cudas_run_constraint_admits_a_version_the_real_channels_carry() -> None:
    """conda's own MatchSpec over the versions the real channels carry: no CUDA row of the table
    pins its runtime to a version nobody publishes."""
    from conda_stubs import carried_records

    carried: dict[str, list[str]] = {}
    for record in carried_records():
        carried.setdefault(record.name, []).append(record.version)
    specs = {c: str(tables.cuda_info(c).run_constraint) for c in tables.cuda_versions()}
    proc = subprocess.run(
        [str(_venv() / "bin" / "python"), "-c", MATCH_SCRIPT],
        input=json.dumps({"specs": specs, "carried": carried}), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    admitted = json.loads(proc.stdout)
    assert [c for c, versions in admitted.items() if not versions] == []
    # 11.0: conda-forge's 11.0.3, not defaults' 11.0.221 (mismatched libcublas/libcublasLt:
    # `import torch` fails, pytorch#51080; builder 2fc7ad44 pinned <11.0.221 for every later build).
    assert admitted["11.0"] == ["11.0.3"]
    assert admitted["11.1"] == ["11.1.1", "11.1.74"]
    assert admitted["12.4"] == ["12.4"] and admitted["13.0"] == ["13.0"]


def _conda_create(channel: Path, specs: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_venv() / "bin" / "python"), "-m", "conda", "create", "--dry-run", "--json", "--offline",
         "--prefix", str(tmp_path / "env"), "--override-channels", "-c", channel.as_uri(), *specs],
        capture_output=True, text=True, check=False, env=_conda_env(tmp_path / "pkgs"),
    )  # fmt: skip


def test_the_cuda_11_0_package_solves_with_the_cudatoolkit_the_real_channels_carry(
    rendered: dict[str, dict], stub_channel: Path, tmp_path: Path
) -> None:
    """The real conda solver installs a pytorch 1.8.0/CUDA 11.0 package (a stand-in carrying the
    run requirements conda-build rendered for it) with cudatoolkit 11.0.3, and refuses the broken
    11.0.221 the constraint leaves out on purpose."""
    (out,) = rendered["pytorch-1.8.0-cuda11.0-py3.8"]["outputs"]
    run = out["requirements"]["run"]
    assert "cudatoolkit >=11.0,<11.0.221" in run
    channel = tmp_path / "channel"
    for pkg in (stub_channel / "linux-64").glob("*.conda"):
        (channel / "linux-64").mkdir(parents=True, exist_ok=True)
        (channel / "linux-64" / pkg.name).write_bytes(pkg.read_bytes())
    write_stub(channel, StubRecord("pytorch", out["version"], out["build"], 0, tuple(run)))
    (channel / "noarch").mkdir()
    index_channel(channel)

    solved = _conda_create(channel, ["pytorch"], tmp_path)
    assert solved.returncode == 0, solved.stdout[-2000:] + solved.stderr[-2000:]
    linked = {a["name"]: a["version"] for a in json.loads(solved.stdout)["actions"]["LINK"]}
    assert linked["pytorch"] == "1.8.0" and linked["cudatoolkit"] == "11.0.3"

    refused = _conda_create(channel, ["pytorch", "cudatoolkit ==11.0.221"], tmp_path)
    assert refused.returncode != 0
    assert "cudatoolkit" in refused.stdout + refused.stderr

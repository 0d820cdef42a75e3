"""NVIDIA's CUDA library wheels become conda-forge's packages of the same libraries.

A recipe asks for conda-forge's names (libcublas-dev, libcudnn-dev, nccl, ...) and finds headers and
libraries in the prefix's include/ and lib/; `condapipe wheels` must give a machine without a conda
channel the same packages, with the same files in the same places, from the real wheels (the small
ones: nvidia-cuda-runtime, nvidia-nvtx, nvidia-nvml-dev, nvidia-nvjpeg, downloaded once with pip into
the cache the upstream tests share).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest
from e2e_helpers import condapipe, install

from condapipe.facts.families import family_facts
from condapipe.facts.tables import pypi_conda_names, wheel_cuda_libraries
from condapipe.inputchannels.wheel_channel import conda_dependency, running_python

CACHE = Path(os.environ.get("CONDAPIPE_UPSTREAM_CACHE", Path.home() / ".cache" / "condapipe-upstream"))
# The CUDA 13.0 runtime, and three CUDA 13 libraries: two split in two (nvtx; nvjpeg, which
# torchvision's GPU JPEG codec links), one that is one package on conda-forge (nvml-dev: headers only).
WHEELS = ("nvidia-cuda-runtime==13.0.96", "nvidia-nvtx==13.5.25", "nvidia-nvml-dev==13.0.87",
          "nvidia-nvjpeg==13.3.2.43")  # fmt: skip
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64")


@cache
def real_wheels() -> Path:
    folder = CACHE / "wheels" / "nvidia-cu13-small"
    folder.mkdir(parents=True, exist_ok=True)
    for spec in WHEELS:
        name = spec.split("==")[0].replace("-", "_")
        if list(folder.glob(f"{name}-*.whl")):
            continue
        argv = [sys.executable, "-m", "pip", "download", spec, "--no-deps", "--only-binary=:all:",
                "--python-version", "3.12", "-d", str(folder), "-q"]  # fmt: skip
        for platform in PLATFORMS:
            argv += ["--platform", platform]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"pip download {spec}: {done.stderr[-400:]}"
    return folder


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cuda-channel") / "ch"
    code, _, err = condapipe(
        "wheels", *map(str, sorted(real_wheels().glob("*.whl"))), "--to", str(out), cwd=out.parent
    )
    assert code == 0, err
    return out


def _elf_soname(path: Path) -> bytes:
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF", path
    return data


def test_a_dev_package_brings_headers_links_and_its_runtime_into_the_prefix(
    channel: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    names = install(channel, ["cuda-cudart-dev", "cuda-nvtx-dev", "cuda-nvml-dev"], prefix, tmp_path / "c")
    assert names == ["cuda-cudart", "cuda-cudart-dev", "cuda-nvml-dev", "cuda-nvtx", "cuda-nvtx-dev"]
    for header in ("cuda_runtime.h", "cuda_runtime_api.h", "nvml.h", "nvtx3/nvToolsExt.h"):
        assert (prefix / "include" / header).is_file(), header
    link = prefix / "lib" / "libcudart.so"  # what a linker's -lcudart and CMake's find_library need
    assert link.is_symlink() and os.readlink(link) == "libcudart.so.13"
    assert b"libcudart.so.13" in _elf_soname(prefix / "lib" / "libcudart.so.13")
    assert (prefix / "lib" / "libcudart_static.a").is_file()  # static archives: build-time only
    assert (prefix / "share" / "licenses" / "cuda-cudart" / "License.txt").is_file()
    # nothing is left in the wheels' own layout, and no Python is needed for any of it
    assert not list(prefix.glob("lib/python*")) and "python" not in names


def test_nvjpeg_comes_as_conda_forges_libnvjpeg_and_libnvjpeg_dev(channel: Path, tmp_path: Path) -> None:
    """What torchvision's setup.py looks for (CUDA_HOME/include/nvjpeg.h) and links (-lnvjpeg)."""
    prefix = tmp_path / "env"
    assert install(channel, ["libnvjpeg-dev"], prefix, tmp_path / "c") == ["libnvjpeg", "libnvjpeg-dev"]
    assert (prefix / "include" / "nvjpeg.h").is_file()
    assert os.readlink(prefix / "lib" / "libnvjpeg.so") == "libnvjpeg.so.13"
    assert b"libnvjpeg.so.13" in _elf_soname(prefix / "lib" / "libnvjpeg.so.13")


def test_the_runtime_package_holds_what_runs_and_nothing_a_build_reads(channel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    assert install(channel, ["cuda-cudart", "cuda-nvtx"], prefix, tmp_path / "c") == [
        "cuda-cudart",
        "cuda-nvtx",
    ]
    libs = sorted(p.name for p in (prefix / "lib").iterdir())
    assert libs == ["libcudart.so.13", "libnvtx3interop.so.1"]
    assert not (prefix / "include").exists()


def test_the_dev_package_pins_its_runtime_to_the_same_build(channel: Path) -> None:
    import json

    repodata = json.loads((channel / "linux-64" / "repodata.json").read_text())
    records = {r["name"]: r for r in repodata["packages.conda"].values()}
    assert records["cuda-cudart-dev"]["depends"] == ["cuda-cudart ==13.0.96 pypi_wheel_0"]
    assert records["cuda-cudart"]["depends"] == [] and records["cuda-nvml-dev"]["depends"] == []
    assert records["cuda-nvtx"]["version"] == "13.5.25"


LINKS_NVTX = """\
package:
  name: links-nvtx
  version: 0.1.0
build:
  number: 0
  script:
    - mkdir -p $PREFIX/share && cp $PREFIX/include/nvtx3/nvToolsExt.h $PREFIX/share/
requirements:
  host:
    - cuda-nvtx-dev
    - cuda-nvml-dev
"""


def _info(package: Path) -> Path:
    """The package's info/ folder, unpacked beside it."""
    import conda_package_handling.api as cph

    dest = package.parent / f"unpacked-{package.stem}"
    cph.extract(str(package), dest_dir=str(dest), components="info")
    return dest / "info"


def _info_json(package: Path, member: str) -> dict:
    import json

    return json.loads((_info(package) / member).read_text())


def test_a_package_built_against_a_dev_package_needs_its_runtime_up_to_the_next_major(
    channel: Path, tmp_path: Path
) -> None:
    """conda-forge's libcublas-dev, libcudnn-dev, nccl ... run-export their runtime package (max_pin
    x); the wheel-made ones must too, or a package built offline names `libcublas` with no bounds."""
    import json

    repodata = json.loads((channel / "linux-64" / "repodata.json").read_text())
    files = {r["name"]: channel / "linux-64" / f for f, r in repodata["packages.conda"].items()}
    assert _info_json(files["cuda-nvtx-dev"], "run_exports.json") == {"weak": ["cuda-nvtx >=13.5.25,<14.0a0"]}
    assert _info_json(files["cuda-cudart-dev"], "run_exports.json") == {
        "weak": ["cuda-cudart >=13.0.96,<14.0a0"]
    }
    for name in ("cuda-nvtx", "cuda-nvml-dev"):  # a runtime package, and a headers-only one
        assert not (_info(files[name]) / "run_exports.json").exists(), name
    # the real engine applies it: rattler-build, offline, this channel only
    recipe = tmp_path / "links-nvtx"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(LINKS_NVTX)
    argv = [sys.executable, "-c", "from condapipe.cli.main import main; main()", "build", str(recipe)]
    argv += ["--engine", "rattler-build", "--no-test", "--offline", "--output-dir", str(tmp_path / "out")]
    argv += ["-c", str(channel), "--override-channels"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (built,) = (tmp_path / "out").glob("*/links-nvtx-0.1.0-*.conda")
    assert "cuda-nvtx >=13.5.25,<14.0a0" in _info_json(built, "index.json")["depends"]


LINKS_NVTX_META = """\
package:
  name: links-nvtx
  version: 0.1.0
build:
  number: 0
  script: mkdir -p $PREFIX/share && cp $PREFIX/include/nvtx3/nvToolsExt.h $PREFIX/share/
requirements:
  host:
    - cuda-nvtx-dev
"""


def test_conda_build_applies_the_same_run_export(channel: Path, tmp_path: Path, real_conda: Path) -> None:
    """conda-build reads info/run_exports.json of its host packages too (the other engine)."""
    recipe = tmp_path / "links-nvtx"
    recipe.mkdir()
    (recipe / "meta.yaml").write_text(LINKS_NVTX_META)
    argv = [sys.executable, "-c", "from condapipe.cli.main import main; main()", "build", str(recipe)]
    argv += ["--engine", "conda-build", "--no-test", "--offline", "--output-dir", str(tmp_path / "out")]
    argv += ["-c", str(channel), "--override-channels"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (built,) = (tmp_path / "out").glob("*/links-nvtx-0.1.0-*.conda")
    assert "cuda-nvtx >=13.5.25,<14.0a0" in _info_json(built, "index.json")["depends"]


def test_requirements_between_nvidia_wheels_become_conda_forges_runtime_names() -> None:
    target = running_python()
    # nvidia-cusolver requires these; nvidia-cudnn-cu13 requires nvidia-cublas
    assert conda_dependency("nvidia-cublas", target) == "libcublas"
    assert conda_dependency("nvidia-cusparse", target) == "libcusparse"
    assert conda_dependency("nvidia-nvjitlink", target) == "libnvjitlink"
    assert conda_dependency("nvidia-cuda-nvrtc", target) == "cuda-nvrtc"


def test_every_cuda_library_the_pytorch_recipe_asks_for_can_come_from_a_wheel() -> None:
    """The recipe's host and run names (recipes/pytorch/family.yaml cuda_host_libraries) are all
    packages `condapipe wheels` makes; cuda-version is conda-forge's metapackage, no library."""
    runtimes = set(wheel_cuda_libraries())
    assert runtimes <= set(pypi_conda_names().values())  # some wheel is named for each
    made = runtimes | {dev for dev in wheel_cuda_libraries().values() if dev}
    wanted = family_facts("pytorch")["cuda_host_libraries"]
    for item in [*wanted["host"], *wanted["run"]]:
        name = item.split()[0]
        assert name == "cuda-version" or name in made, item


def test_every_cuda_library_the_torchvision_recipe_asks_for_can_come_from_a_wheel() -> None:
    made = set(wheel_cuda_libraries()) | {dev for dev in wheel_cuda_libraries().values() if dev}
    facts = family_facts("torchvision")
    wanted = [
        *facts["cuda_host_libraries"]["host"],
        *(p for e in facts["cuda_run_packages"] for p in e["packages"]),
    ]
    for item in wanted:
        name = item.split()[0]
        assert name == "cuda-version" or name in made, item


def test_a_wheel_named_like_nvidias_but_laid_out_otherwise_is_refused(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    wheels.mkdir()
    info = "nvidia_cublas-13.0.0.19.dist-info"
    with zipfile.ZipFile(wheels / "nvidia_cublas-13.0.0.19-py3-none-manylinux_2_27_x86_64.whl", "w") as z:
        z.writestr("cublas.py", "X = 1\n")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: nvidia-cublas\nVersion: 13.0.0.19\n")
        z.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-manylinux_2_27_x86_64\n",
        )
        z.writestr(f"{info}/RECORD", "")
    code, _, err = condapipe("wheels", str(wheels), "--to", str(tmp_path / "ch"), cwd=tmp_path)
    assert code == 2 and "not under nvidia/<library>/" in err and len(err.strip().splitlines()) == 1

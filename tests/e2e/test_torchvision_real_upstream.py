"""Opt-in (`pytest -m upstream`): torchvision's real release source built through condapipe.

torchvision 0.21.0 (Debian's orig tarball of pytorch-vision, upstream files only) is rendered,
built by rattler-build, fixed, verified, tested and published by condapipe's own plan, as
`condapipe build torchvision --version 0.21.0 --cuda cpu` does, against the torch release it pairs
with, 2.6.0. No conda channel is reachable here, so the host and run environments come from local
channels:

- python (a venv of this CPython), torch 2.6.0 and its dependencies, numpy, pillow, setuptools, pip:
  PyPI wheels laid out as conda packages by `condapipe wheels` (condapipe.inputchannels.wheel_channel).
  PyPI's torch 2.6.0 for linux x86_64 is upstream's CUDA 12.4 build (with its nvidia-* wheels); no
  CPU-only 2.6.0 wheel exists on PyPI. torchvision is built as the recipe's cpu variant (its C++
  operators and image codecs, no CUDA kernels) against that package, pinned by the package's own
  build string (`cp311_pypi_wheel_0`: the spec's `against`), not relabelled as a condapipe build.
- libpng, libjpeg-turbo, libwebp-base: Debian's binary packages of this machine's release laid out as
  conda packages (tests/debian_lib_packages.py).

Then the published package is installed into a fresh prefix with py-rattler, where
`torchvision.ops.nms`, `roi_align` and PNG/JPEG decoding run (the package's own test also ran them in
the plan's test step).

Environment (the test skips naming what is missing):
- CONDAPIPE_TORCHVISION_SOURCE: the 0.21.0 release tree, or pytorch-vision_0.21.0.orig.tar.gz
- CONDAPIPE_TORCH_WHEELS: a folder of wheels: `pip download torch==2.6.0 "numpy<2.3" pillow setuptools
  pip --only-binary=:all: -d DIR` (about 3.2 GB with the nvidia-* wheels)
- CONDAPIPE_IMAGE_DEBS: a folder of Debian .debs: `apt-get download libpng-dev libpng16-16
  libjpeg62-turbo-dev libjpeg62-turbo libwebp-dev libwebp7 libwebpdemux2 libwebpmux3`
- CONDAPIPE_TORCHVISION_WORK (optional): a folder to build in and keep (default: pytest's tmp_path)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from condapipe.buildspec.build_spec import build_spec
from condapipe.package.channel_index import index_channel
from condapipe.plan import PlanOptions, make_family_plan, run_plan

pytestmark = [pytest.mark.upstream, pytest.mark.slow, pytest.mark.timeout(3 * 3600)]

VERSION, TORCH = "0.21.0", "2.6.0"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _required(name: str) -> Path:
    value = os.environ.get(name)
    if not value or not Path(value).exists():
        pytest.skip(f"set {name} (see this module's docstring): {value or 'unset'}")
    return Path(value).resolve()


def _host_channel(channel: Path, wheels: Path, debs: Path) -> str:
    """The local channel of the host/run environments; returns the torch package's build string."""
    from debian_lib_packages import deb_conda_package

    from condapipe.inputchannels.wheel_channel import make_wheel_channel

    made = make_wheel_channel(channel, sorted(wheels.glob("*.whl")))
    torch = [p for p in made if p.name.startswith(f"pytorch-{TORCH}-")]
    assert len(torch) == 1, [p.name for p in made]
    subdir = channel / "linux-64"
    for name, version, pattern in (
        ("libpng", "1.6.39", "libpng*.deb"),
        ("libjpeg-turbo", "2.1.5", "libjpeg62-turbo*.deb"),
        ("libwebp-base", "1.2.4", "libwebp*.deb"),
    ):
        found = sorted(debs.glob(pattern))
        assert found, f"no {pattern} in {debs}"
        deb_conda_package(name, version, found, subdir)
    index_channel(channel)
    return torch[0].name.removeprefix(f"pytorch-{TORCH}-").removesuffix(".conda")


def _install(channels: list[Path], specs: list[str], prefix: Path, cache: Path) -> None:
    import rattler

    async def run() -> None:
        records = await rattler.solve(
            [rattler.Channel(str(c)) for c in channels], specs, platforms=["linux-64", "noarch"]
        )
        await rattler.install(records, prefix, cache_dir=cache, show_progress=False)

    asyncio.run(run())


CHECK = """
import torch, torchvision
from torchvision import io, ops
boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], dtype=torch.float32)
keep = ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
assert keep.tolist() == [0, 2], keep
out = ops.roi_align(torch.rand(1, 2, 8, 8), torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]]), (2, 2))
assert out.shape == (1, 2, 2, 2)
img = (torch.arange(3 * 8 * 8) % 256).to(torch.uint8).reshape(3, 8, 8)
assert torch.equal(io.decode_png(io.encode_png(img)), img)
assert io.decode_jpeg(io.encode_jpeg(img, quality=95)).shape == img.shape
print(torchvision.__version__, torch.__version__, torch.ops.torchvision.nms)
"""


def test_torchvision_0_21_0_builds_against_torch_2_6_0_and_runs(tmp_path: Path) -> None:
    source = _required("CONDAPIPE_TORCHVISION_SOURCE")
    wheels = _required("CONDAPIPE_TORCH_WHEELS")
    debs = _required("CONDAPIPE_IMAGE_DEBS")
    work = Path(os.environ.get("CONDAPIPE_TORCHVISION_WORK") or tmp_path).resolve()
    host = work / "host-channel"
    torch_build = _host_channel(host, wheels, debs)

    from condapipe.inputchannels.tool_channel import TOOLS, default_sources, make_tool_channel

    tools = work / "tool-channel"
    make_tool_channel(tools, default_sources(TOOLS))  # ninja (and cmake) from the wheels beside condapipe

    settings = {"version": VERSION, "cuda": ["cpu"], "python": [PYTHON], "source": str(source)}
    spec = dataclasses.replace(build_spec("torchvision", settings), against=(("pytorch", torch_build),))
    output = work / "channel"
    options = PlanOptions(
        output_dir=output,
        work_dir=work / "work",
        engine="rattler-build",
        channels=(str(host), str(tools)),
        override_channels=True,
    )
    result = run_plan(make_family_plan(spec, options))
    statuses = {r.step.id: r.status for r in result.results}
    assert result.ok, statuses

    built = sorted((output / "linux-64").glob(f"torchvision-{VERSION}-py{PYTHON}_cpu_0.conda"))
    assert len(built) == 1, sorted(p.name for p in (output / "linux-64").iterdir())
    prefix = work / "env"
    _install([output, host], [f"torchvision =={VERSION}"], prefix, work / "pkgs-cache")
    proc = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", CHECK], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"{VERSION} {TORCH}"), proc.stdout
    (work / "result.json").write_text(json.dumps({"statuses": statuses, "check": proc.stdout}, indent=1))

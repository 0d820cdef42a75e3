"""The libtorch stand-in build's settings and stand-in dependencies, shared by the e2e test and the
shared-compile-cache test (which builds the same stand-in on two "runners")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conda_package_handling import api as cph

from condapipe.buildspec.build_spec import build_spec
from condapipe.render.families.libtorch import build_model

STANDIN = Path(__file__).parent / "data" / "libtorch-standin"
TEST_PROJECT = Path(__file__).resolve().parents[1] / "recipes" / "libtorch" / "cmake_test"
SETTINGS = {"version": "2.4.1", "cuda": ["cpu"], "blas": "openblas", "source": str(STANDIN)}
CUDA_ARCHS = "8.0;9.0+PTX"
CUDA_SETTINGS = {**SETTINGS, "version": "2.9.0", "cuda": ["13.0"], "arch": CUDA_ARCHS}
# Versions the recipe's requirements ask for (the CUDA run constraint pins cuda-version 13.0).
STUB_VERSIONS = {"python": "3.11.0", "cuda-version": "13.0"}


def standin_tree(dest: Path, version: str) -> Path:
    """The stand-in copied to `dest`, its version.txt saying `version`: a --source is checked against
    --version before anything is built (condapipe.render.source_check), as a real tree would be."""
    shutil.copytree(STANDIN, dest)
    (dest / "version.txt").write_text(version + "\n")
    return dest


MAGMA_SOURCE = "int magma_init(void) { return 0; }\nint magma_finalize(void) { return 0; }\n"


def magma_standin(channel: Path, name: str) -> None:
    """A magma-cudaXY package with what the libtorch recipe links: lib/libmagma.a (real gcc and ar
    output defining magma_init) and its header, so a CUDA stand-in build links magma statically as
    PyTorch does and verify finds it there."""
    from elfkit import make_package, run, write_metadata

    root = channel.parent / f"standin-{name}"
    (root / "lib").mkdir(parents=True)
    (root / "include").mkdir()
    source = channel.parent / f"{name}-magma.c"
    source.write_text(MAGMA_SOURCE)
    run("gcc", "-c", "-fPIC", "-O0", "-o", root / "magma.o", source)
    run("ar", "rcs", root / "lib" / "libmagma.a", root / "magma.o")
    (root / "magma.o").unlink()
    (root / "include" / "magma_v2.h").write_text("int magma_init(void);\nint magma_finalize(void);\n")
    version = STUB_VERSIONS.get(name, "1.0.0")
    write_metadata(root, name=name, version=version)
    make_package(root, channel / "linux-64" / f"{name}-{version}-0.conda")


def stub_package(channel: Path, name: str) -> None:
    """An empty conda package `name` (what a dependency that cannot be downloaded here provides);
    magma-cudaXY is a small real static library (magma_standin)."""
    if name.startswith("magma-cuda"):
        magma_standin(channel, name)
        return
    pkg_dir = channel.parent / f"stub-{name}"
    info = pkg_dir / "info"
    info.mkdir(parents=True)
    index = {
        "name": name,
        "version": STUB_VERSIONS.get(name, "1.0.0"),
        "build": "stub_0",
        "build_number": 0,
        "depends": [],
        "subdir": "linux-64",
        "platform": "linux",
        "arch": "x86_64",
        "license": "BSD-3-Clause",
    }
    (info / "index.json").write_text(json.dumps(index))
    (info / "paths.json").write_text(json.dumps({"paths": [], "paths_version": 1}))
    (channel / "linux-64").mkdir(parents=True, exist_ok=True)
    out = f"{name}-{index['version']}-stub_0.conda"
    cph.create(
        str(pkg_dir), ["info/index.json", "info/paths.json"], out, out_folder=str(channel / "linux-64")
    )


def recipe_dependencies(settings: dict) -> set[str]:
    """Every package name the libtorch recipe asks for (build, host, run, test), variant refs resolved."""
    model = build_model(build_spec("libtorch", dict(settings)))
    values = {key: vals[0] for key, vals in model.variants.keys}
    req = model.requirements
    specs = [d.spec for d in (*req.build, *req.host, *req.run)] + list(model.tests.requires)
    names = set()
    for spec in specs:
        for key, value in values.items():
            spec = spec.replace("{{ " + key + " }}", value)
        names.add(spec.split()[0])
    return names

"""Stand-in conda packages: empty packages with the names, versions and builds a recipe's
dependencies have on the real channels, for solves that cannot reach those channels here.

Each is a real `.conda` written by conda-package-handling (the writer conda-build itself uses)
and the channel is indexed by condapipe's publish stage, so conda, conda-build and py-rattler read
it like any channel. Only the packages' payload is missing: nothing here runs their code.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from conda_package_handling import api as cph
from ruamel.yaml import YAML

from condapipe.facts import tables
from condapipe.package.channel_index import index_channel

STUB_CHANNEL_DATA = Path(__file__).parent / "data" / "conda-stub-channel.yaml"


@dataclass(frozen=True)
class StubRecord:
    name: str
    version: str
    build: str = "0"
    build_number: int = 0
    depends: tuple[str, ...] = ()


def write_stub(channel: Path, record: StubRecord, subdir: str = "linux-64") -> Path:
    """`channel/subdir/NAME-VERSION-BUILD.conda`: an empty package with `record`'s metadata."""
    index = {
        "name": record.name,
        "version": record.version,
        "build": record.build,
        "build_number": record.build_number,
        "depends": list(record.depends),
        "subdir": subdir,
        "license": "BSD-3-Clause",
        **({"platform": "linux", "arch": "x86_64"} if subdir == "linux-64" else {}),
    }
    out_dir = channel / subdir
    out_dir.mkdir(parents=True, exist_ok=True)
    out = f"{record.name}-{record.version}-{record.build}.conda"
    with tempfile.TemporaryDirectory() as tmp:
        info = Path(tmp) / "info"
        info.mkdir()
        (info / "index.json").write_text(json.dumps(index))
        (info / "paths.json").write_text(json.dumps({"paths": [], "paths_version": 1}))
        cph.create(tmp, ["info/index.json", "info/paths.json"], out, out_folder=str(out_dir))
    return out_dir / out


def carried_records() -> Iterator[StubRecord]:
    """What tests/data/conda-stub-channel.yaml says the real channels carry."""
    data = YAML(typ="safe").load(STUB_CHANNEL_DATA.read_text())["packages"]
    for name, entry in data.items():
        for version in entry.get("versions", ()):
            yield StubRecord(name, str(version))
        for version, build, number, depends in entry.get("builds", ()):
            yield StubRecord(name, str(version), str(build), int(number), tuple(depends))


def magma_records() -> Iterator[StubRecord]:
    """The magma packages `condapipe build magma` makes, as the CUDA table names and numbers them."""
    seen = set()
    for cuda in tables.cuda_versions():
        magma = tables.cuda_info(cuda).magma
        if magma.package not in seen:
            seen.add(magma.package)
            yield StubRecord(magma.package, magma.version, str(magma.build_number), magma.build_number)


def make_stub_channel(channel: Path, records: Sequence[StubRecord] | None = None) -> Path:
    """A local channel of stand-ins (default: every carried record and every magma package)."""
    for record in records if records is not None else [*carried_records(), *magma_records()]:
        write_stub(channel, record)
    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    index_channel(channel)
    return channel

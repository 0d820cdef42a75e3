"""Publishing costs what indexing needs, not what the package weighs.

A `.conda` keeps its index.json in the small inner info-*.tar.zst: the index reads that member and
hashes the file once, never decompressing the payload; the package enters the channel as a hard
link where the build output shares its filesystem; what the publisher already hashed is not hashed
again — unless the file in the channel is no longer the one it placed.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import zstandard
from fake_anaconda import make_package

from condapipe.hashing import hash_file
from condapipe.package.channel_index import index_channel
from condapipe.package.io import read_index
from condapipe.package.repodata import Known, record
from condapipe.publish.local_channel import publish_packages


def _records(channel: Path, subdir: str) -> dict[str, dict]:
    data = json.loads((channel / subdir / "repodata.json").read_text())
    return {**data["packages"], **data["packages.conda"]}


def _with_unreadable_payload(package: Path) -> None:
    """Replace the pkg-*.tar.zst member by bytes no zstd reader accepts (info-* stays intact)."""
    tmp = package.with_suffix(".tmp")
    with zipfile.ZipFile(package) as src, zipfile.ZipFile(tmp, "w") as dst:
        for item in src.infolist():
            data = b"not zstd at all" * 1000 if item.filename.startswith("pkg-") else src.read(item)
            dst.writestr(item, data)
    tmp.replace(package)


def test_indexing_reads_the_metadata_member_and_never_the_payload(tmp_path: Path) -> None:
    channel = tmp_path / "ch"
    pkg = make_package(channel / "linux-64", "torchshape", "1.0", subdir="linux-64", depends=["libzlib"])
    _with_unreadable_payload(pkg)

    index_channel(channel)

    rec = _records(channel, "linux-64")[pkg.name]
    raw = pkg.read_bytes()
    assert (rec["name"], rec["version"], rec["depends"]) == ("torchshape", "1.0", ["libzlib"])
    assert rec["sha256"] == hashlib.sha256(raw).hexdigest()
    assert rec["md5"] == hashlib.md5(raw).hexdigest()
    assert rec["size"] == len(raw)


def test_a_published_package_is_a_hard_link_to_the_built_file(tmp_path: Path) -> None:
    built = make_package(tmp_path / "out", "magma-cuda130", "2.6.1", subdir="linux-64")
    channel = tmp_path / "ch"

    outcomes, _ = publish_packages(channel, [built])

    placed = channel / "linux-64" / built.name
    assert outcomes[0].status.value == "uploaded"
    assert placed.stat().st_ino == built.stat().st_ino
    assert placed.stat().st_mode & 0o777 == 0o644
    assert _records(channel, "linux-64")[built.name]["sha256"] == hash_file(built).sha256
    assert not [p.name for p in (channel / "linux-64").iterdir() if p.name.startswith(".")]


def test_repodata_zst_says_what_repodata_json_says_and_foreign_index_files_go(tmp_path: Path) -> None:
    channel = tmp_path / "ch"
    make_package(channel / "noarch", "a", "1.0")
    (channel / "noarch").mkdir(exist_ok=True)
    stale = channel / "noarch" / "repodata_shards.msgpack.zst"
    stale.write_bytes(b"an older indexer's view")

    index_channel(channel)

    sub = channel / "noarch"
    assert (
        zstandard.ZstdDecompressor().decompress((sub / "repodata.json.zst").read_bytes())
        == (sub / "repodata.json").read_bytes()
    )
    assert not stale.exists()


def test_what_the_publisher_knows_is_used_only_while_the_file_is_the_one_it_placed(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, "a", "1.0")
    digest = hash_file(pkg, md5=True)
    claimed = Known.placed(pkg, digest, {**read_index(pkg), "license": "from the publisher"})
    assert record(pkg, claimed)["license"] == "from the publisher"  # taken as known, not re-read

    other = make_package(tmp_path / "other", "a", "1.0", depends=["b"])
    other.replace(pkg)  # another file now has this name: what was known no longer describes it

    rec = record(pkg, claimed)
    assert rec["depends"] == ["b"] and rec["sha256"] == hash_file(pkg).sha256


def test_a_built_file_with_another_mode_is_copied_not_linked(tmp_path: Path) -> None:
    built = make_package(tmp_path / "out", "magma-cuda130", "2.6.1", subdir="linux-64")
    built.chmod(0o600)  # a link would share this mode with every reader of the channel

    publish_packages(tmp_path / "ch", [built])

    placed = tmp_path / "ch" / "linux-64" / built.name
    assert placed.stat().st_ino != built.stat().st_ino
    assert placed.stat().st_mode & 0o777 == 0o644 and placed.read_bytes() == built.read_bytes()

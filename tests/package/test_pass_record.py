"""--pack-from-stage: verify and publish take what the packing pass computed instead of reading again.

Why a user cares: after the one streaming pass, every further read of a multi-GB payload is time
the build waits for. The pass computes each payload file's sha256 and size from the bytes it
packs; the fix step hashes the package it writes once (sha256, md5, size). While the package is
still that file, verify does not hash the payload again and publish does not read the package for
repodata's digests. Once the package is changed, both read it again, so a tampered package is
still caught. Reads are counted by the bytes this process read (/proc/self/io `rchar`): a real
build with real rattler-build, fix, verify and publish, nothing stubbed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from condapipe.engines import BuildOptions, RattlerBuildEngine
from condapipe.fix.fixer import fix_package_file
from condapipe.fix.staged import write_launcher
from condapipe.hashing import hash_file
from condapipe.package import pass_record, tree_record
from condapipe.package.channel_index import ensure_channel
from condapipe.package.io import PackOptions, pack, unpack
from condapipe.publish.local_channel import publish_packages
from condapipe.render.model import STAGED_FIX_ENV
from condapipe.verify.verifier import verify_package

BLOB = 8_000_000  # random bytes: incompressible, so every read of the payload shows in rchar

RECIPE = f"""\
package:
  name: passrec
  version: 1.0.0
build:
  number: 0
  script:
    env:
      CONDAPIPE_STAGED_FIX: ${{{{ env.get("CONDAPIPE_STAGED_FIX", default="") }}}}
    content:
      - mkdir -p $PREFIX/share/passrec
      - head -c {BLOB} /dev/urandom > $PREFIX/share/passrec/blob.bin
      - printf 'prefix=%s\\n' "$PREFIX" > $PREFIX/share/passrec/config.txt
      - 'if [ -n "${{CONDAPIPE_STAGED_FIX:-}}" ]; then "$CONDAPIPE_STAGED_FIX" --prefix "$PREFIX"; fi'
  dynamic_linking:
    binary_relocation: ${{{{ env.get("CONDAPIPE_STAGED_FIX", default="") == "" }}}}
"""


def rchar() -> int:
    """Bytes this process has read so far (every thread, page cache included)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def build(tmp: Path, pack_from_stage: bool) -> Path:
    recipe = tmp / "recipe" / "passrec"
    recipe.mkdir(parents=True, exist_ok=True)
    (recipe / "recipe.yaml").write_text(RECIPE)
    launcher = write_launcher(tmp / "bin")
    assert launcher is not None
    options = BuildOptions(
        output_dir=tmp / "engine-out",
        work_dir=tmp / "work",
        run_tests=False,
        compression_level=3,
        env=((STAGED_FIX_ENV, str(launcher)),),
        pack_from_stage=pack_from_stage,
    )
    ensure_channel(options.output_dir)
    (package,) = RattlerBuildEngine().build(recipe, options).packages
    return package


def fix(package: Path, out_dir: Path) -> Path:
    report = fix_package_file(
        package, output_dir=out_dir, keep_tree=True, pack_options=PackOptions(zstd_level=3)
    )
    return Path(str(report.output))


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package built with --pack-from-stage, then fixed as the plan's fix step does."""
    tmp = tmp_path_factory.mktemp("passrec")
    engine_pkg = build(tmp, pack_from_stage=True)
    assert pass_record.trusted(engine_pkg) is not None  # the pass's record went along with the package
    return fix(engine_pkg, tmp / "fix" / engine_pkg.parent.name)


def copy_with_records(fixed: Path, dest_dir: Path) -> Path:
    """The fixed package with its kept tree and records, as a test of its own may change them."""
    dest_dir.mkdir(parents=True)
    dest = dest_dir / fixed.name
    for src, to in (
        (fixed, dest),
        (pass_record.record_path(fixed), pass_record.record_path(dest)),
        (tree_record.record_path(fixed), tree_record.record_path(dest)),
        (tree_record.tree_path(fixed), tree_record.tree_path(dest)),
    ):
        if src.is_dir():
            shutil.copytree(src, to, symlinks=True, copy_function=os.link)
        else:
            os.link(src, to)  # same inode and mtime: still the file its pass wrote
    return dest


def test_verify_takes_the_pass_hashes_and_reads_neither_payload_nor_package(
    fixed: Path, tmp_path: Path
) -> None:
    pkg = copy_with_records(fixed, tmp_path / "v")
    before = rchar()
    report = verify_package(pkg)
    read = rchar() - before
    assert report.ok, report.errors
    assert (report.read_from, report.hashes_from) == ("kept tree", "packing pass")
    assert report.files_checked >= 2
    assert read < BLOB // 2, f"verify read {read} bytes"


def test_publish_takes_the_fix_steps_digest_and_repodata_holds_the_files_own(
    fixed: Path, tmp_path: Path
) -> None:
    pkg = copy_with_records(fixed, tmp_path / "p")
    channel = tmp_path / "channel"
    before = rchar()
    publish_packages(channel, [pkg], force=True)
    read = rchar() - before
    assert read < BLOB // 2, f"publish read {read} bytes"
    actual = hash_file(pkg, md5=True)
    record = json.loads((channel / fixed.parent.name / "repodata.json").read_text())["packages.conda"][
        pkg.name
    ]
    assert (record["sha256"], record["md5"], record["size"]) == (actual.sha256, actual.md5, actual.size)


def test_a_package_changed_after_the_pass_is_read_again_and_its_tampering_caught(
    fixed: Path, tmp_path: Path
) -> None:
    pkg = copy_with_records(fixed, tmp_path / "t")
    recorded = pass_record.trusted(pkg)
    assert recorded is not None and recorded.digest is not None
    # other bytes in the payload, paths.json unchanged, written into the same file (same inode)
    root = unpack(pkg, tmp_path / "u")
    blob = root / "share/passrec/blob.bin"
    blob.write_bytes(bytes(b ^ 0xFF for b in blob.read_bytes()[:64]) + blob.read_bytes()[64:])
    tampered = pack(root, tmp_path / "repacked" / pkg.name, PackOptions(zstd_level=3))
    tree_record.discard(pkg)  # verify unpacks the package itself, as it does without a kept tree
    data = tampered.read_bytes()
    with pkg.open("r+b") as fh:
        fh.write(data)
        fh.truncate(len(data))
    assert pass_record.trusted(pkg) is None

    before = rchar()
    report = verify_package(pkg)
    assert rchar() - before > BLOB  # the payload was hashed again
    assert report.hashes_from == "read"
    assert any("share/passrec/blob.bin: sha256 differs from paths.json" in e for e in report.errors)

    (outcome,), _ = publish_packages(tmp_path / "channel", [pkg], force=True)
    assert outcome.sha256 == hash_file(pkg).sha256 != recorded.digest.sha256


def test_a_write_after_the_record_is_seen_even_when_the_size_stays(tmp_path: Path) -> None:
    pkg = tmp_path / "x-1.0-0.conda"
    pkg.write_bytes(b"a" * 1000)
    pass_record.write(pkg, pass_record.PassRecord(hash_file(pkg, md5=True), payload_hashes_from_pass=True))
    assert pass_record.trusted(pkg) is not None
    moved = tmp_path / "sub" / pkg.name
    moved.parent.mkdir()
    pkg.rename(moved)
    pass_record.move_with(pkg, moved)
    assert pass_record.trusted(moved) is not None  # a rename keeps the file
    time.sleep(0.001)
    with moved.open("r+b") as fh:
        fh.write(b"b")  # same size, other bytes
    assert pass_record.trusted(moved) is None


def test_without_the_flag_no_record_exists_and_everything_is_read(tmp_path: Path) -> None:
    engine_pkg = build(tmp_path, pack_from_stage=False)
    assert not pass_record.record_path(engine_pkg).exists()
    out = fix(engine_pkg, tmp_path / "fix" / engine_pkg.parent.name)
    assert not pass_record.record_path(out).exists()
    report = verify_package(out)
    assert report.ok and (report.read_from, report.hashes_from) == ("kept tree", "read")

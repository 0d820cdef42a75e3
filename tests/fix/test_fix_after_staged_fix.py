"""--pack-from-stage: the fix step does not unpack a payload the staged fix already fixed.

Why a user cares: at 3.4 GB, unpacking the package again only to find that every ELF file is
already right was most of the fix step (14.9 of 18.8 s on 16 cores), time the build waits for
after the one compression pass. The staged fix records what it fixed and with which rules and
code; the packing pass carries that record with the package. While the package is still the file
the pass wrote, and the fix step would apply the same rules with the same code, it places the
package into its output (a hard link) and reports what the staged fix did; verify then reads the
package itself once, or, as the plan builds, the payload folder the pass packed, kept beside the
package as its tree and handed on by the fix step. A package changed after the pass, or a record
of other rules or code, is unpacked and checked as before. Reads are counted by /proc/self/io
`rchar`; real rattler-build, gcc and patchelf, nothing stubbed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import build_json
from elfkit import LIB_SRC, gcc_shared, readelf_dynamic

from condapipe.engines import BuildOptions, RattlerBuildEngine
from condapipe.fix.fixer import FileFix, FixReport, fix_package_file
from condapipe.fix.stage_out import record_fix
from condapipe.fix.staged import staged_options, write_launcher
from condapipe.hashing import hash_file
from condapipe.package import pass_record, tree_record
from condapipe.package.channel_index import ensure_channel
from condapipe.package.info_records import RENDERED, WORK_DIR_NAME
from condapipe.package.io import PackOptions, pack, read_info_file, unpack
from condapipe.package.stage_layout import FIX_RECORD, PAYLOAD
from condapipe.plan.code_inputs import staged_fix_digest
from condapipe.render.model import STAGED_FIX_ENV
from condapipe.verify.verifier import verify_package

BLOB = 8_000_000  # random bytes: incompressible, so every read of the payload shows in rchar
LEVEL = PackOptions(zstd_level=3)

RECIPE = f"""\
package:
  name: stagedfix
  version: 1.0.0
build:
  number: 0
  script:
    env:
      CONDAPIPE_STAGED_FIX: ${{{{ env.get("CONDAPIPE_STAGED_FIX", default="") }}}}
    content:
      - mkdir -p $PREFIX/lib $PREFIX/share/stagedfix
      - printf 'int f(void){{return 1;}}\\n' > f.c
      - gcc -shared -fPIC f.c -o $PREFIX/lib/libf.so -Wl,-rpath,$PREFIX/lib
      - head -c {BLOB} /dev/urandom > $PREFIX/share/stagedfix/blob.bin
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


def rpath_of(path: Path) -> str:
    (line,) = [entry for entry in readelf_dynamic(path) if "RPATH" in entry or "RUNPATH" in entry]
    return line.split("[", 1)[1].rstrip("]")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A package built with --pack-from-stage (the staged fix ran in its build script), and the
    work dir its build used."""
    tmp = tmp_path_factory.mktemp("stagedfix")
    recipe = tmp / "recipe" / "stagedfix"
    recipe.mkdir(parents=True)
    (recipe / "recipe.yaml").write_text(RECIPE)
    launcher = write_launcher(tmp / "bin")
    assert launcher is not None
    options = BuildOptions(
        output_dir=tmp / "engine-out",
        work_dir=tmp / "work",
        run_tests=False,
        compression_level=3,
        env=((STAGED_FIX_ENV, str(launcher)),),
        pack_from_stage=True,
        keep_tree=True,  # as the plan builds: verify reads the payload the pass packed
    )
    ensure_channel(options.output_dir)
    (package,) = RattlerBuildEngine().build(recipe, options).packages
    return package, options.work_dir


def copy_with_record(package: Path, dest_dir: Path) -> Path:
    """The engine's package and its pass record, hard-linked (still the file its pass wrote)."""
    dest_dir.mkdir(parents=True)
    dest = dest_dir / package.name
    os.link(package, dest)
    os.link(pass_record.record_path(package), pass_record.record_path(dest))
    return dest


def copy_with_tree(package: Path, dest_dir: Path) -> Path:
    """As copy_with_record, with the tree the packing pass kept beside the package (its files
    hard-linked: the same entries, sizes and mtimes)."""
    dest = copy_with_record(package, dest_dir)
    shutil.copytree(
        tree_record.tree_path(package), tree_record.tree_path(dest), symlinks=True, copy_function=os.link
    )
    os.link(tree_record.record_path(package), tree_record.record_path(dest))
    return dest


def files_of(root: Path) -> dict[str, bytes | str]:
    """Every file and symlink below `root`: its bytes, or its link target."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, names in os.walk(root):
        for name in [*names, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            out[rel] = os.readlink(full) if full.is_symlink() else full.read_bytes()
    return out


def fix(
    package: Path, out_dir: Path, *, staged: bool, work_dir: Path | None = None, **kw: object
) -> FixReport:
    """As the plan's fix step calls it (`staged`: with this code's staged fix digest)."""
    return fix_package_file(
        package,
        output_dir=out_dir,
        keep_tree=True,
        pack_options=LEVEL,
        records_work_dir=work_dir,
        staged_code=staged_fix_digest() if staged else None,
        **kw,  # type: ignore[arg-type]
    )


def test_the_pass_record_says_what_the_staged_fix_did(built: tuple[Path, Path]) -> None:
    package, work = built
    record = pass_record.trusted(package)
    assert record is not None and record.payload_hashes_from_pass and record.staged_fix is not None
    assert record.digest == hash_file(package, md5=True)  # hashed once by the packing pass
    (libf,) = record.staged_fix["files"]
    assert libf["path"] == "lib/libf.so" and libf["new_rpath"] == "$ORIGIN" and libf["patcher"]
    # the info records the pass wrote name no folder of condapipe's work dir
    assert str(work.resolve()) not in read_info_file(package, RENDERED).decode()
    assert WORK_DIR_NAME in read_info_file(package, RENDERED).decode()


def test_the_fix_step_places_the_package_without_reading_its_payload(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    package = copy_with_record(built[0], tmp_path / "in")
    code = staged_fix_digest()  # the plan computes it once (it reads condapipe's source)
    before = rchar()
    report = fix_package_file(
        package, output_dir=tmp_path / "out", keep_tree=True, pack_options=LEVEL, staged_code=code
    )
    read = rchar() - before

    assert read < BLOB // 2, f"the fix step read {read} bytes"
    out = Path(str(report.output))
    assert report.fixed_in_stage and report.written == "linked" and "unpack" not in report.timings
    assert out.stat().st_ino == package.stat().st_ino  # the same file: nothing written
    assert [(f.path, f.new_rpath) for f in report.changed] == [("lib/libf.so", "$ORIGIN")]  # the staged fix's
    carried = pass_record.trusted(out)
    assert carried is not None and carried.digest == hash_file(out, md5=True)

    # verify needs no tree of fix's: it reads the package once and takes the pass's file hashes
    before = rchar()
    checked = verify_package(out)
    assert checked.ok, checked.errors
    assert (checked.read_from, checked.hashes_from) == ("package", "packing pass")
    assert rchar() - before < 2 * out.stat().st_size + BLOB // 2


def test_the_tree_the_pass_kept_goes_with_the_package_and_verify_reads_it(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    package = copy_with_tree(built[0], tmp_path / "in")
    # the payload folder the pass packed, with the info files: exactly what unpacking gives
    assert files_of(tree_record.tree_path(package)) == files_of(unpack(package, tmp_path / "unpacked"))
    code = staged_fix_digest()
    before = rchar()
    report = fix_package_file(
        package, output_dir=tmp_path / "out", keep_tree=True, pack_options=LEVEL, staged_code=code
    )
    out = Path(str(report.output))
    checked = verify_package(out)
    read = rchar() - before

    assert report.written == "linked" and checked.ok, checked.errors
    assert (checked.read_from, checked.hashes_from) == ("kept tree", "packing pass")
    assert not tree_record.tree_path(package).exists()  # moved, not copied
    assert read < BLOB // 2, f"fix and verify read {read} bytes"


@pytest.mark.parametrize("records", ["none", "work-dir", "named-dir"])
def test_the_result_is_the_old_paths_for_the_same_package(
    built: tuple[Path, Path], tmp_path: Path, records: str
) -> None:
    package, work = built
    # the work dir: the packing pass already wrote records that do not name it; a folder the
    # records do name (the one holding the engine's output channel): both paths rewrite them
    work_dir = {"none": None, "work-dir": work, "named-dir": work.parent}[records]
    old = fix(copy_with_record(package, tmp_path / "a"), tmp_path / "old", staged=False, work_dir=work_dir)
    new = fix(copy_with_record(package, tmp_path / "b"), tmp_path / "new", staged=True, work_dir=work_dir)

    assert not old.fixed_in_stage and "unpack" in old.timings and new.fixed_in_stage
    assert not old.changed  # the old path finds every ELF file already right: the staged fix ran
    old_out, new_out = Path(str(old.output)), Path(str(new.output))
    assert hash_file(old_out, md5=True) == hash_file(new_out, md5=True)
    # an untouched package: the old path copies it, the new one links it; records to rewrite: both
    # rewrite the info member alone, the payload's zstd stream copied
    rewritten = records == "named-dir"
    assert (old.written, new.written) == (("info-rewritten",) * 2 if rewritten else ("copied", "linked"))
    assert [f.path for f in old.files] == [f.path for f in new.files] == ["lib/libf.so"]
    old_rec, new_rec = pass_record.trusted(old_out), pass_record.trusted(new_out)
    assert old_rec is not None and new_rec is not None and old_rec.digest == new_rec.digest


def test_a_package_changed_after_the_pass_is_unpacked_and_fixed_as_before(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    package = copy_with_record(built[0], tmp_path / "in")
    # the library's build-machine rpath put back, packed into the same file (same inode)
    root = unpack(package, tmp_path / "u")
    lib = root / "lib" / "libf.so"
    subprocess.run(
        ["patchelf", "--force-rpath", "--set-rpath", "/opt/build-machine/lib", str(lib)], check=True
    )
    changed = pack(root, tmp_path / "repacked" / package.name, LEVEL).read_bytes()
    with package.open("r+b") as fh:
        fh.write(changed)
        fh.truncate(len(changed))
    assert pass_record.trusted(package) is None

    report = fix(package, tmp_path / "out", staged=True)

    assert not report.fixed_in_stage and "unpack" in report.timings and report.written == "repacked"
    assert [(f.path, f.old_rpath, f.new_rpath) for f in report.changed] == [
        ("lib/libf.so", "/opt/build-machine/lib", "$ORIGIN")
    ]
    fixed = unpack(Path(str(report.output)), tmp_path / "fixed")
    assert rpath_of(fixed / "lib" / "libf.so") == "$ORIGIN"


@pytest.mark.parametrize(
    "other",
    [{"staged_code": "0" * 64}, {"extra_rpaths": ("lib/extra",)}],
    ids=["other-code", "other-rules"],
)
def test_a_record_of_another_fix_is_not_taken(
    built: tuple[Path, Path], tmp_path: Path, other: dict[str, object]
) -> None:
    package = copy_with_record(built[0], tmp_path / "in")
    report = fix_package_file(
        package,
        output_dir=tmp_path / "out",
        pack_options=LEVEL,
        **{"staged_code": staged_fix_digest(), **other},
    )  # type: ignore[arg-type]
    assert not report.fixed_in_stage and "unpack" in report.timings


def test_a_payload_file_the_staged_fix_did_not_check_leaves_no_record(tmp_path: Path) -> None:
    # a hard link of a fixed library whose patcher wrote a new file keeps the old bytes under the
    # other name: the staged fix checked one name per file, so it cannot vouch for the payload
    stage = tmp_path / "stage"
    payload = stage / PAYLOAD / "lib"
    gcc_shared(payload / "libf.so", LIB_SRC, rpath="$ORIGIN")
    shutil.copy2(payload / "libf.so", payload / "libf-alias.so")
    report = FixReport(
        target=str(stage), dry_run=False, files=[FileFix("lib/libf.so", "$ORIGIN", "$ORIGIN", "rpath")]
    )
    options = staged_options("default")

    assert record_fix(stage, report, options, "code") is None
    assert not (stage / FIX_RECORD).exists()

    report.files.append(FileFix("lib/libf-alias.so", "$ORIGIN", "$ORIGIN", "rpath"))
    assert record_fix(stage, report, options, "code") == stage / FIX_RECORD


def test_condapipe_build_with_pack_from_stage_unpacks_nothing_after_the_pass(tmp_path: Path) -> None:
    # the plan as a user runs it: the fix step links the package, verify reads the payload folder
    # the pass packed; a level changed afterwards is the fix step's to apply (recompressed, no
    # unpack), and verify then reads the package it wrote
    recipe = tmp_path / "recipe" / "stagedfix"
    recipe.mkdir(parents=True)
    (recipe / "recipe.yaml").write_text(RECIPE)
    args = ("--engine", "rattler-build", "--pack-from-stage", "--no-test", "--work-dir", str(tmp_path / "w"))
    report = build_json(str(recipe), "--compression-level", "3", *args, cwd=tmp_path)
    steps = {s["kind"]: s for s in report["steps"]}
    (published,) = map(Path, report["packages"])
    fixed = steps["fix"]["data"]["fix"][published.name]
    assert (fixed["fixed_in_stage"], fixed["written"], fixed["changed"]) == (True, "linked", 1)
    assert "unpack" not in fixed["timings"]
    assert steps["verify"]["data"]["verify"][published.name]["read_from"] == "kept tree"
    assert not list((tmp_path / "w").rglob(".*.tree*"))  # read once, then gone (its removal waited for)

    again = build_json(str(recipe), "--compression-level", "5", *args, cwd=tmp_path)
    steps = {s["kind"]: s for s in again["steps"]}
    assert steps["build"]["status"] == "unchanged"
    fixed = steps["fix"]["data"]["fix"][published.name]
    assert (fixed["fixed_in_stage"], fixed["written"]) == (True, "recompressed")
    assert steps["verify"]["data"]["verify"][published.name]["read_from"] == "package"

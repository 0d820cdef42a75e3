"""A published package's payload is compressed exactly once: by its engine, at the final level.

The engine is asked for the level the user wants (never a draft) and for every core the memory
bound allows; the fix step then leaves the payload's zstd stream as the engine wrote it — copied,
never decompressed and compressed again — and rewrites only the small info tar when its records
change. Only a fix that changes a payload file repacks. zstd frames do not record their level, so
"compressed at level L" is checked the honest way: a stream is byte for byte what condapipe's own
compressor makes of the same tar at level L, and "not recompressed" is: the published pkg member
is byte for byte the engine's. `condapipe build RECIPE_DIR` runs build -> fix -> verify -> test ->
publish: nothing unverified is published.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from e2e_helpers import build_json, condapipe
from elfkit import LIB_SRC, gcc_shared, write_metadata

from condapipe.fix.fixer import FixOptions, fix_package
from condapipe.package.info_records import ABOUT
from condapipe.package.io import DEFAULT_ZSTD_LEVEL, PackOptions, pack, recompress

HERE = Path(__file__).parent.parent
RECIPES = HERE / "data" / "recipes"
BUILD_PREFIX = "/home/ci/conda-bld/demo_1700000000/_h_env_placehold_placehold_placehold"


def inner_stream(pkg: Path, component: str = "pkg") -> bytes:
    """The raw `<component>-*.tar.zst` member of a `.conda`."""
    with zipfile.ZipFile(pkg) as zf:
        (name,) = [n for n in zf.namelist() if n.startswith(f"{component}-") and n.endswith(".tar.zst")]
        return zf.read(name)


def inner_tar(pkg: Path, component: str = "pkg") -> bytes:
    import zstandard

    return (
        zstandard.ZstdDecompressor()
        .stream_reader(inner_stream(pkg, component), read_across_frames=True)
        .read()
    )


def tar_members(pkg: Path, component: str = "pkg") -> dict[str, tuple[str, int, str, bytes]]:
    """name -> (type, mode, link target, bytes) of a component's tar (what an install lays down)."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(inner_tar(pkg, component))) as tar:
        for m in tar.getmembers():
            data = tar.extractfile(m).read() if m.isfile() else b""  # type: ignore[union-attr]
            out[m.name] = (m.type.decode(), m.mode, m.linkname, data)
    return out


def condapipe_compression(tar: bytes, level: int) -> bytes:
    """What condapipe's compressor (pack / recompress) writes for these tar bytes at `level`."""
    import zstandard

    out = io.BytesIO()
    cctx = zstandard.ZstdCompressor(compression_params=PackOptions(zstd_level=level).zstd_parameters())
    with cctx.stream_writer(out, closefd=False) as writer:
        writer.write(tar)
    return out.getvalue()


def compressed_at(pkg: Path, level: int, component: str = "pkg") -> bool:
    return inner_stream(pkg, component) == condapipe_compression(inner_tar(pkg, component), level)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """An unpacked package: a library with the build machine's rpath (the fix rewrites it) and data."""
    root = tmp_path / "tree"
    gcc_shared(root / "lib" / "libdemo.so", LIB_SRC, soname="libdemo.so", rpath=f"{BUILD_PREFIX}/lib")
    (root / "share").mkdir()
    (root / "share" / "data.txt").write_text("compressible text\n" * 20000)
    (root / "share" / "link").symlink_to("data.txt")
    write_metadata(root, name="demo")
    return root


def _about_naming(root: Path, work: Path) -> None:
    """An about.json recording the staging channel in condapipe's work dir (the fix drops it)."""
    about = {"channels": [str(work / "staging"), "https://example.invalid/user-channel"], "summary": "demo"}
    (root / ABOUT).write_text(json.dumps(about))


def test_an_unchanged_payload_keeps_the_engines_stream_and_only_info_is_rewritten(
    tree: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    fixed_tree = fix_package(  # a tree whose ELF files are already as fix wants them
        pack(tree, tmp_path / "first" / "demo-1.0-0.conda"), FixOptions(build_prefixes=(BUILD_PREFIX,))
    )
    engine = Path(str(fixed_tree.output))
    from condapipe.package.io import unpack

    root = unpack(engine, tmp_path / "again")
    _about_naming(root, work)
    engine = pack(root, tmp_path / "engine" / "demo-1.0-0.conda", PackOptions(zstd_level=9))

    report = fix_package(
        engine,
        FixOptions(build_prefixes=(BUILD_PREFIX,)),
        output_dir=tmp_path / "out",
        pack_options=PackOptions(zstd_level=9),
        records_work_dir=work,
    )
    out = Path(str(report.output))
    assert (report.changed, report.written) == ([], "info-rewritten")
    assert inner_stream(out) == inner_stream(engine)  # the payload stream copied, never recompressed
    assert compressed_at(out, 9, "info")
    about = json.loads(tar_members(out, "info")[ABOUT][3])
    assert about["channels"] == ["https://example.invalid/user-channel"]
    before, after = tar_members(engine, "info"), tar_members(out, "info")
    assert {k: v for k, v in after.items() if k != ABOUT} == {k: v for k, v in before.items() if k != ABOUT}


def test_nothing_to_change_copies_the_package_as_the_engine_wrote_it(tree: Path, tmp_path: Path) -> None:
    options = FixOptions(build_prefixes=(BUILD_PREFIX,))
    first = fix_package(pack(tree, tmp_path / "a" / "demo-1.0-0.conda"), options)
    again = fix_package(Path(str(first.output)), options, output_dir=tmp_path / "b")
    assert again.written == "copied"
    assert Path(str(again.output)).read_bytes() == Path(str(first.output)).read_bytes()


def test_a_changed_payload_file_is_repacked_once_at_the_final_level(tree: Path, tmp_path: Path) -> None:
    engine = pack(tree, tmp_path / "engine" / "demo-1.0-0.conda", PackOptions(zstd_level=9))
    report = fix_package(
        engine,
        FixOptions(build_prefixes=(BUILD_PREFIX,)),
        output_dir=tmp_path / "out",
        pack_options=PackOptions(zstd_level=9),
    )
    assert (len(report.changed), report.written) == (1, "repacked")
    assert compressed_at(Path(str(report.output)), 9)


def test_a_level_changed_after_the_build_is_applied_to_the_engines_tar(tree: Path, tmp_path: Path) -> None:
    """The one case fix compresses an unchanged payload: the package was built at another level."""
    options = FixOptions(build_prefixes=(BUILD_PREFIX,))
    built = fix_package(pack(tree, tmp_path / "a" / "demo-1.0-0.conda", PackOptions(zstd_level=3)), options)
    engine = Path(str(built.output))
    report = fix_package(
        engine, options, output_dir=tmp_path / "b", pack_options=PackOptions(zstd_level=9), repack_level=True
    )
    assert report.written == "recompressed"
    out = Path(str(report.output))
    assert compressed_at(out, 9) and inner_tar(out) == inner_tar(engine)
    direct = recompress(engine, tmp_path / "c" / engine.name, PackOptions(zstd_level=9))
    assert inner_stream(direct) == inner_stream(out)


def test_the_engines_threads_are_every_core_the_memory_bound_allows() -> None:
    from condapipe.package.io import zstd_worker_mib

    cores = os.cpu_count() or 1
    assert PackOptions(zstd_level=19, max_memory_mib=0).engine_threads() == cores
    # 64 cores and 503 GiB available (a quarter is the bound): every core, the level's own tables
    assert PackOptions(zstd_level=19, threads=64, max_memory_mib=503 * 1024 // 4).engine_threads() == 64
    # a 1 GiB bound (a 4 GiB machine): only as many standard-table workers as fit in it
    small = PackOptions(zstd_level=19, threads=16, max_memory_mib=1024)
    assert small.engine_threads() == (1024 - 256) // zstd_worker_mib(19) < 16
    assert PackOptions(zstd_level=19, threads=16, max_memory_mib=64).engine_threads() == 1


def test_packing_on_a_small_machine_stays_within_its_memory_bound(tmp_path: Path) -> None:
    """A real 512 MiB bound with 8 workers wanted and 96 MiB to pack at level 19 (enough for
    every worker to hold a job): the child's own peak (VmHWM) stays under the bound."""
    src = tmp_path / "tree"
    (src / "lib").mkdir(parents=True)
    write_metadata(src, name="big")
    block = b"".join(i.to_bytes(4, "little") * 3 for i in range(1 << 16))  # compressible, not trivially
    with (src / "lib" / "data.bin").open("wb") as fh:
        for _ in range(96):
            fh.write(os.urandom(1 << 18) + block[: (1 << 20) - (1 << 18)])
    code = (
        "import re, sys\n"
        "from pathlib import Path\n"
        "from condapipe.package.io import PackOptions, pack\n"
        "opts = PackOptions(zstd_level=19, threads=8, max_memory_mib=512)\n"
        "pack(Path(sys.argv[1]), Path(sys.argv[2]), opts)\n"
        "hwm = int(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "print(opts.zstd_threads(), hwm // 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(src), str(tmp_path / "big-1.0-0.conda")],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    ).stdout
    threads, hwm_mib = map(int, out.split())
    # as many lean-table workers as the bound holds, several even on this small bound
    assert threads == PackOptions(zstd_level=19, threads=8, max_memory_mib=512).zstd_threads() >= 4
    assert hwm_mib <= 512, f"peak {hwm_mib} MiB over the 512 MiB bound"


def _steps(report: dict) -> dict[str, dict]:
    return {s["kind"]: s for s in report["steps"]}


def _engine_package(work: Path) -> Path:
    """The package the engine wrote (the build step's staging output, kept for a fix rerun)."""
    (pkg,) = work.glob("steps/build*/out/*/*.conda")
    return pkg


def _plain_rattler_build(recipe: Path, out: Path, level: int) -> Path:
    """The same recipe through py-rattler-build alone, as a user runs it (no condapipe)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "import rattler_build as rb\n"
        "recipe = rb.Stage0Recipe.from_file(Path(sys.argv[1]))\n"
        "(variant,) = recipe.render(rb.VariantConfig())\n"
        "result = variant.run_build(tool_config=rb.ToolConfiguration(test_strategy='skip'),\n"
        "    output_dir=Path(sys.argv[2]), channels=[], package_format=sys.argv[3], no_build_id=True)\n"
        "print(result.packages[0])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(recipe / "recipe.yaml"), str(out), f"conda:{level}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_rattler_build_packs_once_at_the_users_level_and_the_package_is_its_own_packing(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    args = ("--no-test", "--work-dir", str(work))
    report = build_json(str(RECIPES / "libgreet"), "--compression-level", "7", *args, cwd=tmp_path)
    steps = _steps(report)
    assert [s["kind"] for s in report["steps"]] == ["build", "fix", "verify", "test", "publish"]
    log = Path(report["log"]).read_text()
    from condapipe.plan.jobs import PlanOptions
    from condapipe.plan.steps import engine_compression_threads

    threads = PackOptions(zstd_level=7).engine_threads()
    assert f"(package format conda:7, compression threads {threads})" in log  # no draft asked for
    assert engine_compression_threads(PlanOptions(output_dir=tmp_path, work_dir=tmp_path)) == (
        PackOptions(zstd_level=DEFAULT_ZSTD_LEVEL).engine_threads()
    )
    (published,) = map(Path, report["packages"])
    engine = _engine_package(work)
    assert steps["fix"]["data"]["fix"][published.name]["written"] in ("copied", "info-rewritten")
    assert inner_stream(published) == inner_stream(engine)  # fix did not recompress the payload

    # What rattler-build alone makes of the recipe at the same level, in the folder condapipe had
    # it build in (its prefix is recorded in text files): the same files, modes, links and bytes;
    # the same index and paths records (a build's timestamp aside).
    scratch = work.resolve() / "rattler-build" / "libgreet"
    assert not scratch.exists()
    plain = _plain_rattler_build(RECIPES / "libgreet", scratch, 7)
    assert tar_members(published) == tar_members(plain)
    ours, theirs = tar_members(published, "info"), tar_members(plain, "info")
    assert sorted(ours) == sorted(theirs)
    differ = sorted(name for name in ours if ours[name] != theirs[name])
    # index.json: the build's timestamp; about.json: condapipe's staging channel dropped (both
    # checked below); the rendered recipe records the channels and folders each run was given
    assert differ == [ABOUT, "info/index.json", "info/recipe/rendered_recipe.yaml"], differ
    abouts = [{k: v for k, v in json.loads(m[ABOUT][3]).items() if k != "channels"} for m in (ours, theirs)]
    assert abouts[0] == abouts[1]
    ours_index, their_index = (json.loads(m["info/index.json"][3]) for m in (ours, theirs))
    ours_index.pop("timestamp"), their_index.pop("timestamp")
    assert ours_index == their_index

    # Another level after the build: the fix step applies it to the engine's tar, no rebuild.
    again = build_json(str(RECIPES / "libgreet"), "--compression-level", "12", *args, cwd=tmp_path)
    assert _steps(again)["build"]["status"] == "unchanged"
    assert _steps(again)["fix"]["data"]["fix"][published.name]["written"] == "recompressed"
    assert compressed_at(Path(again["packages"][0]), 12)


MISSING_LIB_RECIPE = """\
package:
  name: links-missing
  version: 1.0.0
build:
  number: 0
  script:
    - printf 'int missing_value(void) { return 1; }\\n' > m.c
    - gcc -shared -fPIC -o libmissing.so.1 -Wl,-soname,libmissing.so.1 m.c
    - printf 'int missing_value(void); int main(void) { return missing_value(); }\\n' > app.c
    - mkdir -p $PREFIX/bin && gcc -o $PREFIX/bin/links-missing app.c -L. -l:libmissing.so.1
"""


@pytest.mark.slow
def test_a_recipe_dir_package_that_fails_verify_is_not_published(tmp_path: Path) -> None:
    recipe = tmp_path / "links-missing"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(MISSING_LIB_RECIPE)
    code, _, err = condapipe("build", str(recipe), "--no-test", cwd=tmp_path)
    assert code == 1
    assert "verify failed for links-missing-1.0.0-" in err and "libmissing.so.1" in err
    channel = tmp_path / "channel"
    assert not [p for p in channel.rglob("*") if p.name.endswith((".conda", ".tar.bz2"))]


def test_conda_build_packs_once_at_the_final_level_on_every_core(real_conda: Path, tmp_path: Path) -> None:
    """The real conda build gets `--zstd-compression-level 19` (the argv condapipe logs first in
    the engine log) and the threads (conda-package-handling's constant, set in conda-build's own
    interpreter); the published payload stream is the engine's, byte for byte."""
    work = tmp_path / "work"
    args = ("--engine", "conda-build", "--no-test", "--work-dir", str(work))
    report = build_json(str(RECIPES / "hello-v0"), *args, cwd=tmp_path)
    lines = Path(report["log"]).read_text().splitlines()
    argv = lines[0].split()
    assert argv[argv.index("--zstd-compression-level") + 1] == str(DEFAULT_ZSTD_LEVEL)
    threads = PackOptions(zstd_level=DEFAULT_ZSTD_LEVEL).engine_threads()
    assert f"condapipe: compression threads {threads}" in lines
    (published,) = map(Path, report["packages"])
    assert inner_stream(published) == inner_stream(_engine_package(work))
    assert _steps(report)["fix"]["data"]["fix"][published.name]["written"] in ("copied", "info-rewritten")
    assert [s["status"] for s in report["steps"]] == ["ran", "ran", "ran", "skipped", "ran"]


def test_conda_builds_interpreter_compresses_on_the_threads_condapipe_gives(
    real_conda: Path, tmp_path: Path
) -> None:
    from conftest import conda_build_venv

    from condapipe.engines.base import BuildOptions
    from condapipe.engines.conda_build import build_environment

    venv = conda_build_venv()
    assert venv is not None
    probe = "import conda_package_handling.conda_fmt as f; print(f.ZSTD_COMPRESS_THREADS)"
    python = str(venv / "bin" / "python")

    def threads(**kw: object) -> str:
        options = BuildOptions(output_dir=tmp_path / "o", work_dir=tmp_path / "w", **kw)  # type: ignore[arg-type]
        env = build_environment(options)
        proc = subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True, check=True)
        return proc.stdout

    assert threads(compression_threads=5).strip() == "5"
    assert threads().strip() == "1"  # conda-package-handling's own default, left alone without a number
    assert threads(package_format="tar.bz2", compression_threads=5).strip() == "1"


def test_the_dry_run_names_the_final_level_and_threads_and_every_step(tmp_path: Path) -> None:
    code, out, _ = condapipe("build", str(RECIPES / "libgreet"), "--dry-run", "--json", cwd=tmp_path)
    assert code == 0
    plan = json.loads(out)
    threads = PackOptions(zstd_level=DEFAULT_ZSTD_LEVEL).engine_threads()
    assert f"package format: conda:{DEFAULT_ZSTD_LEVEL}, {threads} compression threads" in plan["actions"]
    assert [s["id"].split(":")[0] for s in plan["steps"]] == ["build", "fix", "verify", "test", "publish"]
    assert list(tmp_path.iterdir()) == []

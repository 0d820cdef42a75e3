"""A published package is compressed once, by condapipe, at the level the user asked for.

The engine writes its `.conda` at the draft level (zstd 1, the cheapest both engines take); the
fix step then writes the final package once: repacked when a file changed, recompressed (tar
bytes untouched) when nothing did. zstd frames do not record their level, so "published at level
L" is checked the honest way: the package's inner stream is byte for byte what condapipe's own
compressor makes of the same tar at level L. And `condapipe build RECIPE_DIR` runs the same
build -> fix -> verify -> test -> publish plan as a family: nothing unverified is published.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from e2e_helpers import build_json, condapipe
from elfkit import LIB_SRC, gcc_shared, write_metadata

from condapipe.fix.fixer import FixOptions, fix_package
from condapipe.package.io import (
    DEFAULT_ZSTD_LEVEL,
    DRAFT_ZSTD_LEVEL,
    PackOptions,
    pack,
    recompress,
    unpack,
)

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


def condapipe_compression(tar: bytes, level: int) -> bytes:
    """What condapipe's compressor (pack / recompress) writes for these tar bytes at `level`."""
    import zstandard

    out = io.BytesIO()
    cctx = zstandard.ZstdCompressor(compression_params=PackOptions(zstd_level=level).zstd_parameters())
    with cctx.stream_writer(out, closefd=False) as writer:
        writer.write(tar)
    return out.getvalue()


def compressed_at(pkg: Path, level: int) -> bool:
    """Both inner streams of `pkg` are exactly condapipe's compression of their tar at `level`."""
    return all(
        inner_stream(pkg, c) == condapipe_compression(inner_tar(pkg, c), level) for c in ("pkg", "info")
    )


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


def test_recompressing_a_draft_equals_packing_at_the_final_level(tree: Path, tmp_path: Path) -> None:
    draft = pack(tree, tmp_path / "draft" / "demo-1.0-0.conda", PackOptions(zstd_level=DRAFT_ZSTD_LEVEL))
    final = recompress(draft, tmp_path / "final" / "demo-1.0-0.conda", PackOptions(zstd_level=9))
    packed = pack(tree, tmp_path / "packed" / "demo-1.0-0.conda", PackOptions(zstd_level=9))
    assert compressed_at(draft, DRAFT_ZSTD_LEVEL) and compressed_at(final, 9)
    assert not compressed_at(final, DRAFT_ZSTD_LEVEL)
    for component in ("pkg", "info"):
        assert inner_tar(final, component) == inner_tar(draft, component)  # the engine's tar, untouched
        assert inner_stream(final, component) == inner_stream(packed, component)
    assert final.stat().st_size < draft.stat().st_size
    with zipfile.ZipFile(final) as zf:
        assert zf.namelist() == ["metadata.json", "pkg-demo-1.0-0.tar.zst", "info-demo-1.0-0.tar.zst"]


def test_a_fix_compresses_the_output_once_at_the_final_level(tree: Path, tmp_path: Path) -> None:
    final = PackOptions(zstd_level=9)
    options = FixOptions(build_prefixes=(BUILD_PREFIX,))
    draft = pack(tree, tmp_path / "engine" / "demo-1.0-0.conda", PackOptions(zstd_level=DRAFT_ZSTD_LEVEL))
    engine_bytes = draft.read_bytes()

    changed = fix_package(draft, options, output_dir=tmp_path / "a", pack_options=final, draft=True)
    assert (len(changed.changed), changed.written) == (1, "repacked")
    assert compressed_at(Path(str(changed.output)), 9)
    assert set(changed.timings) == {"unpack", "fix", "write"}

    # Nothing left to change: the engine's draft is recompressed (its tar kept), not unpacked and repacked.
    again = pack(
        unpack(Path(str(changed.output)), tmp_path / "x"), draft, PackOptions(zstd_level=DRAFT_ZSTD_LEVEL)
    )
    same = fix_package(again, options, output_dir=tmp_path / "b", pack_options=final, draft=True)
    assert (same.changed, same.written) == ([], "recompressed")
    assert compressed_at(Path(str(same.output)), 9)
    assert inner_tar(Path(str(same.output))) == inner_tar(again)

    # A package already at its final level that needs nothing is copied as is, never recompressed.
    copied = fix_package(Path(str(same.output)), options, output_dir=tmp_path / "c", pack_options=final)
    assert copied.written == "copied"
    assert Path(str(copied.output)).read_bytes() == Path(str(same.output)).read_bytes()
    assert engine_bytes != Path(str(same.output)).read_bytes()


def _steps(report: dict) -> dict[str, dict]:
    return {s["kind"]: s for s in report["steps"]}


@pytest.mark.slow
def test_a_recipe_dir_goes_through_fix_verify_test_and_is_published_at_the_users_level(
    tmp_path: Path,
) -> None:
    report = build_json(str(RECIPES / "libgreet"), "--compression-level", "7", cwd=tmp_path)
    steps = _steps(report)
    assert [s["kind"] for s in report["steps"]] == ["build", "fix", "verify", "test", "publish"]
    assert all(s["status"] == "ran" for s in report["steps"])
    assert steps["test"]["data"]["tests"] == {Path(report["packages"][0]).name: "1 passed"}
    # The engine packed at the draft level; the published package is at the user's level.
    assert f"(package format conda:{DRAFT_ZSTD_LEVEL})" in Path(report["log"]).read_text()
    (published,) = map(Path, report["packages"])
    assert compressed_at(published, 7)
    assert steps["fix"]["data"]["compression"] == ["conda", 7]

    # Another level is the fix step's business: the build is not redone.
    again = build_json(str(RECIPES / "libgreet"), "--compression-level", "12", "--no-test", cwd=tmp_path)
    assert _steps(again)["build"]["status"] == "unchanged"
    assert _steps(again)["fix"]["status"] == "ran"
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


def test_conda_build_packs_at_the_draft_level_and_condapipe_publishes_the_default(
    real_conda: Path, tmp_path: Path
) -> None:
    """The real conda build gets `--zstd-compression-level 1` (the argv condapipe logs first in the
    engine log), and the published package is condapipe's one compression at the default level."""
    report = build_json(str(RECIPES / "hello-v0"), "--engine", "conda-build", "--no-test", cwd=tmp_path)
    argv = Path(report["log"]).read_text().splitlines()[0].split()
    assert argv[argv.index("--zstd-compression-level") + 1] == str(DRAFT_ZSTD_LEVEL) == "1"
    (published,) = map(Path, report["packages"])
    assert compressed_at(published, DEFAULT_ZSTD_LEVEL)
    assert [s["status"] for s in report["steps"]] == ["ran", "ran", "ran", "skipped", "ran"]


def test_the_dry_run_names_the_draft_level_and_every_step(tmp_path: Path) -> None:
    code, out, _ = condapipe("build", str(RECIPES / "libgreet"), "--dry-run", "--json", cwd=tmp_path)
    assert code == 0
    plan = json.loads(out)
    assert f"package format: conda:{DRAFT_ZSTD_LEVEL}" in plan["actions"]
    assert [s["id"].split(":")[0] for s in plan["steps"]] == ["build", "fix", "verify", "test", "publish"]
    assert list(tmp_path.iterdir()) == []

"""pack_from_stage (issue 35 prototype): the engine packs its metadata, condapipe the payload.

Why a user cares: the payload is read and compressed once, in one streaming pass on every core,
instead of rattler-build copying, hashing and tarring it first; what the user installs must be
exactly what rattler-build's own packing makes. So a recipe with every kind of member the
engine's rules treat differently (a library holding the build prefix, a text file holding it, a
BOM text file, binary data, an executable, an empty file, absolute and relative symlinks, a
dangling one, a link to a directory) is built both ways and the two packages, unpacked, must have
the same files with the same bytes, modes and link targets, and the same info/ files (paths.json
byte for byte; index.json and the rendered recipe differ only in the build's timestamp, the
records naming condapipe's work dir written as the fix step leaves the engine's). The
package built this way installs with py-rattler, its prefix placeholders replaced.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from conda_package_handling import api as cph
from e2e_helpers import install

from condapipe.engines import BuildOptions, RattlerBuildEngine
from condapipe.errors import UsageError
from condapipe.fix.staged import write_launcher
from condapipe.package.channel_index import ensure_channel
from condapipe.package.info_records import rewrite_records
from condapipe.render.model import STAGED_FIX_ENV

RECIPE = """\
package:
  name: stagepack
  version: 1.0.0
build:
  number: 0
  script:
    env:
      CONDAPIPE_STAGED_FIX: ${{ env.get("CONDAPIPE_STAGED_FIX", default="") }}
    content:
      - mkdir -p $PREFIX/lib/sub $PREFIX/share/stagepack $PREFIX/bin
      - printf 'int f(void){return 1;}\\n' > f.c
      - gcc -shared -fPIC f.c -o $PREFIX/lib/libf.so -Wl,-rpath,$PREFIX/lib
      - printf 'prefix=%s\\n' "$PREFIX" > $PREFIX/share/stagepack/config.txt
      - printf '\\xef\\xbb\\xbfbom %s\\n' "$PREFIX" > $PREFIX/share/stagepack/bom.txt
      - printf 'a\\0b %s\\0' "$PREFIX" > $PREFIX/share/stagepack/data.bin
      - printf 'plain text, no prefix\\n' > $PREFIX/share/stagepack/plain.txt
      - printf '#!/bin/sh\\necho hi\\n' > $PREFIX/bin/stagepack-hi && chmod 755 $PREFIX/bin/stagepack-hi
      - ': > $PREFIX/share/stagepack/empty'
      - ln -s $PREFIX/lib/libf.so $PREFIX/lib/libf.so.1
      - ln -s libf.so $PREFIX/lib/sub/../libf.so.0
      - ln -s missing-target $PREFIX/share/stagepack/dangling
      - ln -s stagepack $PREFIX/share/stagepack-dir
      - 'if [ -n "${CONDAPIPE_STAGED_FIX:-}" ]; then "$CONDAPIPE_STAGED_FIX" --prefix "$PREFIX"; fi'
  dynamic_linking:
    binary_relocation: ${{ env.get("CONDAPIPE_STAGED_FIX", default="") == "" }}
"""


# condapipe's own recipes leave binary files out of the prefix scan (condapipe.render.v1)
NO_BINARY_SCAN = "  prefix_detection:\n    ignore_binary_files: true\n"


def build(tmp_path: Path, name: str, *, pack_from_stage: bool, text: str = RECIPE) -> Path:
    recipe = tmp_path / "recipe" / "stagepack"
    if not recipe.is_dir():
        recipe.mkdir(parents=True)
        (recipe / "recipe.yaml").write_text(text)
    launcher = write_launcher(tmp_path / "bin")
    assert launcher is not None
    options = BuildOptions(
        output_dir=tmp_path / "channel",  # one channel and work dir: the same about.json and
        work_dir=tmp_path / "work",  # build prefix both times
        run_tests=False,
        compression_level=19,
        env=((STAGED_FIX_ENV, str(launcher)),),
        pack_from_stage=pack_from_stage,
    )
    ensure_channel(options.output_dir)
    result = RattlerBuildEngine().build(recipe, options)
    (package,) = result.packages
    packed = "condapipe: packed the staged payload into" in result.log_path.read_text()
    assert packed == pack_from_stage  # the payload really went round the engine, or did not
    kept = tmp_path / name / package.parent.name / package.name
    kept.parent.mkdir(parents=True)
    return package.rename(kept)


def tree(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every member below `root`: kind, bytes (a link's target), permission bits."""
    out = {}
    for dirpath, dirnames, names in os.walk(root):
        for name in [*names, *dirnames]:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.fsencode(os.readlink(path)), 0)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def without_timestamp(data: bytes) -> bytes:
    return re.sub(rb"timestamp.*", b"timestamp", data)


@pytest.fixture(scope="module", params=["scan binaries", "no binary scan"])
def both(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("stagepack")
    text = RECIPE if request.param == "scan binaries" else RECIPE + NO_BINARY_SCAN
    engine = build(tmp, "engine", pack_from_stage=False, text=text)
    return engine, build(tmp, "staged", pack_from_stage=True, text=text), tmp


def test_the_package_is_the_engines_own_apart_from_compression(both: tuple[Path, Path, Path]) -> None:
    engine_pkg, staged_pkg, tmp = both
    assert engine_pkg.name == staged_pkg.name
    cph.extract(str(engine_pkg), dest_dir=str(tmp / "u-engine"))
    cph.extract(str(staged_pkg), dest_dir=str(tmp / "u-staged"))
    engine, staged = tree(tmp / "u-engine"), tree(tmp / "u-staged")

    assert sorted(staged) == sorted(engine)
    assert "share/stagepack/config.txt" in engine and "lib/libf.so.1" in engine  # the build's files
    # the records that name condapipe's work dir are written as the fix step leaves the engine's
    rewritten = rewrite_records({rel: d for rel, (_k, d, _m) in engine.items()}, tmp / "work")
    assert "info/recipe/rendered_recipe.yaml" in rewritten  # the engine's named the work dir
    for rel, (kind, data, mode) in engine.items():
        data = rewritten.get(rel, data)
        if rel in ("info/index.json", "info/recipe/rendered_recipe.yaml"):
            assert without_timestamp(staged[rel][1]) == without_timestamp(data), rel
            continue
        assert staged[rel] == (kind, data, mode), rel
    assert b'"file_mode": "text"' in engine["info/paths.json"][1]  # the cases really occur
    scanned = b"ignore_binary_files: true" not in engine["info/recipe/recipe.yaml"][1]
    assert (b'"file_mode": "binary"' in engine["info/paths.json"][1]) == scanned


def test_the_payload_is_compressed_once_at_the_final_level(both: tuple[Path, Path, Path]) -> None:
    import zipfile

    import zstandard

    _, staged_pkg, _ = both
    with zipfile.ZipFile(staged_pkg) as z:
        (pkg,) = [n for n in z.namelist() if n.startswith("pkg-")]
        frame = zstandard.get_frame_parameters(z.read(pkg)[:18])
    assert frame.window_size > 0  # a zstd frame, written by condapipe in one pass


def test_the_package_installs_with_its_prefix_replaced(both: tuple[Path, Path, Path]) -> None:
    _, staged_pkg, tmp = both
    channel = staged_pkg.parent.parent
    ensure_channel(channel)
    prefix = tmp / "env"
    assert install(channel, ["stagepack"], prefix, tmp / "cache") == ["stagepack"]
    assert (prefix / "share/stagepack/config.txt").read_text() == f"prefix={prefix}\n"
    assert os.readlink(prefix / "lib/libf.so.1") == "libf.so"
    assert os.access(prefix / "bin/stagepack-hi", os.X_OK)


def test_a_noarch_package_is_refused_with_one_line(tmp_path: Path) -> None:
    recipe = RECIPE.replace("  number: 0\n", "  number: 0\n  noarch: generic\n", 1)
    recipe = "\n".join(line for line in recipe.splitlines() if " ln -s " not in line)  # noarch: no links
    (tmp_path / "recipe" / "stagepack").mkdir(parents=True)
    (tmp_path / "recipe" / "stagepack" / "recipe.yaml").write_text(recipe)
    with pytest.raises(UsageError, match="noarch: packed by the engine"):
        build(tmp_path, "noarch", pack_from_stage=True)


def test_conda_build_refuses_the_flag_with_one_line(tmp_path: Path) -> None:
    from condapipe.engines import get_engine

    (tmp_path / "meta.yaml").write_text("package: {name: x, version: 1}\n")
    options = BuildOptions(output_dir=tmp_path / "out", work_dir=tmp_path / "work", pack_from_stage=True)
    with pytest.raises(UsageError, match="--pack-from-stage: rattler-build only"):
        get_engine("conda-build").build(tmp_path, options)

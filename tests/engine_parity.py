"""Build one recipe directory with the plain engine and with `condapipe build`, and compare.

The promise under test: whatever recipe a user hands `condapipe build DIR`, the outcome is the
plain engine's (built / skipped / failed) and the packages hold the same files, modes and
index.json. Both sides run for real, in their own processes, against the same local channels:
the plain rattler-build is py-rattler-build's `build_recipes` (the `rattler-build build` pipeline:
it reads variants.yaml / conda_build_config.yaml next to the recipe and honours build/skip), the
plain conda-build is `conda build` (the `real_conda` fixture's conda on PATH).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

BUILT, SKIPPED, FAILED = "built", "skipped", "failed"
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
# index.json fields that say when/where a package was made, not what it is.
VOLATILE_INDEX = {"timestamp", "size", "md5", "sha256"}


@dataclass
class Outcome:
    """What one side made of a recipe: its outcome, and per package file its contents."""

    outcome: str
    packages: dict[str, dict[str, object]] = field(default_factory=dict)
    why: str = ""  # the tail of the output when it failed

    def summary(self) -> tuple[str, list[str]]:
        return self.outcome, sorted(self.packages)


def _members(pkg: Path) -> dict[str, tarfile.TarInfo]:
    """Every member of a .conda (both inner tars) or .tar.bz2 package, by name."""
    members: dict[str, tarfile.TarInfo] = {}
    if pkg.name.endswith(".tar.bz2"):
        with tarfile.open(pkg, "r:bz2") as tar:
            return {m.name: m for m in tar.getmembers()}
    import zipfile

    with zipfile.ZipFile(pkg) as zf:
        for name in zf.namelist():
            if not name.endswith(".tar.zst"):
                continue
            reader = zstandard.ZstdDecompressor().stream_reader(zf.open(name))
            with tarfile.open(fileobj=reader, mode="r|") as tar:
                for member in tar:
                    if member.isfile():
                        tar.extractfile(member)  # consumed: the stream moves on
                    members[member.name] = member
    return members


def _index(pkg: Path) -> dict[str, object]:
    from condapipe.package.io import read_index

    return {k: v for k, v in read_index(pkg).items() if k not in VOLATILE_INDEX}


def package_contents(pkg: Path) -> dict[str, object]:
    """What a user installs: the payload files with their modes and kinds (info/ aside), and the
    package's index.json without its time stamp."""
    files = {
        name: (oct(m.mode & 0o7777), "link" if m.issym() else "dir" if m.isdir() else "file")
        for name, m in _members(pkg).items()
        if not name.startswith("info/") and not m.isdir()
    }
    return {"files": files, "index": _index(pkg)}


def _packages_in(folder: Path) -> dict[str, dict[str, object]]:
    found = [p for p in folder.glob("*/*") if p.name.endswith(PACKAGE_SUFFIXES)] if folder.is_dir() else []
    return {p.name: package_contents(p) for p in sorted(found)}


def _tail(proc: subprocess.CompletedProcess[str]) -> str:
    return (proc.stdout + proc.stderr)[-2500:]


_PLAIN_RATTLER = textwrap.dedent(
    """
    import json, os, sys
    from rattler_build.cli_api import build_recipes
    request = json.loads(sys.argv[1])
    build_recipes([request["recipe"]], output_dir=request["out"], channel=request["channels"],
                  test="native", no_build_id=True, variant_config=request["variant_files"] or None)
    os._exit(0)
    """
)


def plain_rattler_build(
    recipe_dir: Path, out: Path, channels: list[str], timeout: int = 900, variant_files: tuple[Path, ...] = ()
) -> Outcome:
    """`rattler-build build --recipe DIR [-m FILE]` (py-rattler-build's CLI pipeline) into `out`."""
    request = {"recipe": str(recipe_dir / "recipe.yaml"), "out": str(out), "channels": channels}
    request["variant_files"] = [str(f) for f in variant_files]
    proc = subprocess.run(
        [sys.executable, "-c", _PLAIN_RATTLER, json.dumps(request)],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return _outcome(proc, out, [out])


def plain_conda_build(
    recipe_dir: Path,
    out: Path,
    channels: list[str],
    croot: Path,
    timeout: int = 900,
    variant_files: tuple[Path, ...] = (),
) -> Outcome:
    """`conda build DIR [-m FILE]` with the `real_conda` fixture's conda, into `out`."""
    argv = ["conda", "build", str(recipe_dir), "--output-folder", str(out), "--croot", str(croot)]
    argv += [arg for f in variant_files for arg in ("-m", str(f))]
    argv += [arg for c in [str(out), *channels] for arg in ("-c", c)]
    argv += ["--override-channels", "--no-anaconda-upload", "--package-format", "conda"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return _outcome(proc, out, [out])


def condapipe_build(
    recipe_dir: Path,
    engine: str,
    channel: Path,
    work: Path,
    channels: list[str],
    timeout: int = 900,
    variant_files: tuple[Path, ...] = (),
) -> Outcome:
    """`condapipe build DIR --engine ENGINE [-m FILE]` into `channel` (what it publishes counts)."""
    argv = [str(Path(sys.executable).parent / "condapipe"), "build", str(recipe_dir), "--engine", engine]
    argv += [arg for f in variant_files for arg in ("-m", str(f))]
    argv += ["--output-dir", str(channel), "--work-dir", str(work), "--offline", "--json"]
    argv += [arg for c in channels for arg in ("-c", c)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    result = _outcome(proc, channel, [channel])
    if result.outcome == SKIPPED:
        report = json.loads((work / "report.json").read_text())
        assert report["skipped"], f"condapipe built nothing and skipped nothing:\n{_tail(proc)}"
    return result


def _outcome(proc: subprocess.CompletedProcess[str], out: Path, folders: list[Path]) -> Outcome:
    if proc.returncode != 0:
        return Outcome(FAILED, why=_tail(proc))
    packages: dict[str, dict[str, object]] = {}
    for folder in folders:
        packages.update(_packages_in(folder))
    return Outcome(BUILT if packages else SKIPPED, packages, why="" if packages else _tail(proc))


def empty_channel(path: Path) -> Path:
    """An indexed empty local channel (the one both sides search)."""
    from condapipe.package.channel_index import ensure_channel

    ensure_channel(path)
    return path

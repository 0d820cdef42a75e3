"""`condapipe wheels` with hostile wheels (issue 38, items 1, 2 and 7).

A wheel's METADATA is the wheel author's text: its Name and Version become the package's file name
in the channel, so they are held to the same rules as a name or version a user types, and a wheel
is read under the same bounds as every other archive condapipe opens (expanded size, member count,
compression ratio), one member at a time and streamed, never whole in memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]


def _wheel(out: Path, name: str, version: str, meta: bytes, files: dict[str, bytes] | None = None) -> Path:
    """A wheel named `name-version` whose METADATA is `meta` (bytes: any encoding a hostile author likes)."""
    info = f"{name}-{version}.dist-info"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for member, data in (files or {"demo/__init__.py": b"X = 1\n"}).items():
            z.writestr(member, data)
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return path


def _zeros_wheel(out: Path, size: int) -> Path:
    """A wheel whose one module is `size` zero bytes, written in chunks (a zip bomb, when large)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo("bomb/zeros.bin")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as member:
            chunk = bytes(1 << 20)
            for _ in range(size >> 20):
                member.write(chunk)
        z.writestr("bomb-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n")
    return path


def _run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "wheels", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    "field",
    [
        b"Version: 1.0/../../../../outside/evil",
        b"Version: ../../outside",
        b"Name: ../../outside",
        b"Name: demo/../../x",
        b"Version: " + b"1" * 5000,
    ],
)
def test_a_name_or_version_from_metadata_that_is_not_one_is_refused_and_nothing_is_written(
    tmp_path: Path, field: bytes
) -> None:
    work = tmp_path / "work"
    (tmp_path / "outside").mkdir()
    (work / "channel" / "linux-64").mkdir(parents=True)  # the folders a `..` climb would pass through
    meta = b"Metadata-Version: 2.1\n"
    meta += (b"" if field.startswith(b"Name") else b"Name: demo\n") + field + b"\n"
    meta += b"" if field.startswith(b"Version") else b"Version: 1.0\n"
    wheel = _wheel(work / "w", "demo", "1.0", meta)

    done = _run(work, str(wheel), "--to", "channel", "--no-python")

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "METADATA" in done.stderr
    assert len(done.stderr) < 600  # a 5,000-character version is not repeated whole
    assert _tree(tmp_path / "outside") == []
    assert not list((work / "channel").rglob("*.conda"))


def test_a_metadata_name_that_is_not_utf8_is_a_usage_error_not_an_internal_error(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "w", "demo", "1.0", b"Metadata-Version: 2.1\nName: de\xffmo\nVersion: 1.0\n")

    done = _run(tmp_path, str(wheel), "--to", "channel", "--no-python")

    assert done.returncode == 2, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert "METADATA" in done.stderr


def test_a_zip_bomb_wheel_is_refused_by_the_compression_ratio_bound_quickly(tmp_path: Path) -> None:
    wheel = _zeros_wheel(tmp_path / "w", 256 << 20)  # ~250 KB expanding to 256 MiB: ~1000x
    assert wheel.stat().st_size < 2 << 20

    started = time.monotonic()
    done = _run(tmp_path, str(wheel), "--to", "channel", "--no-python")

    assert done.returncode == 2, done.stderr
    assert "CONDAPIPE_MAX_UNPACK_RATIO" in done.stderr  # the same bound, and knob, as packages and sources
    assert time.monotonic() - started < 60
    assert not (tmp_path / "channel").exists() or not list((tmp_path / "channel").rglob("*.conda"))


def test_a_large_member_is_streamed_into_the_package_not_held_in_memory(tmp_path: Path) -> None:
    """With the ratio bound raised, a 1 GiB member still passes through bounded buffers: the
    process's peak memory stays well under the member's size (holding it would need over 1 GiB;
    the margin leaves room for the compressor's worker buffers on a busy machine)."""
    wheel = _zeros_wheel(tmp_path / "w", 1 << 30)
    # VmHWM is the peak of this process's own memory since its exec; ru_maxrss would also count the
    # forking test process's pages (Linux carries the pre-exec high-water mark over exec), which on
    # a whole-suite run is over 1 GiB by itself.
    script = (
        "import re, sys\n"
        "from condapipe.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "status = open('/proc/self/status').read()\n"
        "print(re.search(r'VmHWM:\\s*(\\d+) kB', status).group(1), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "wheels", str(wheel), "--to", "channel", "--no-python"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CONDAPIPE_MAX_UNPACK_RATIO": "100000"},
    )
    assert done.returncode == 0, done.stderr
    peak_mib = int(done.stderr.strip().splitlines()[-1]) >> 10
    assert peak_mib < 640, f"peak RSS {peak_mib} MiB for a 1 GiB member"
    (package,) = (tmp_path / "channel" / "linux-64").glob("bomb-1.0-*.conda")
    assert package.stat().st_size < 8 << 20

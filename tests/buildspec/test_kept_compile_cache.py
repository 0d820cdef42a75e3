"""The kept compile cache is chosen only when the ccache on PATH really runs.

A ccache that is on PATH but cannot start (Debian's binary unpacked without its libhiredis, as on
the lent GPU machine: "error while loading shared libraries") failed magma's build at its first
`ccache --zero-stats`; the default must fall back to no cache instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from condapipe.buildspec.compile_cache import ccache_runs, shared_compile_cache


@pytest.fixture(autouse=True)
def _fresh_probe():
    ccache_runs.cache_clear()
    yield
    ccache_runs.cache_clear()


def _decide(tmp_path: Path) -> object:
    return shared_compile_cache(
        environ={},
        pythons=1,
        work_dir=tmp_path / "work",
        recipe_passes_it=True,
        ccache_found=ccache_runs(),
        resumable=True,
    )


def test_a_ccache_that_cannot_start_gets_no_kept_cache(tmp_path: Path, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / "ccache"
    broken.write_text(
        "#!/bin/sh\necho 'ccache: error while loading shared libraries: libhiredis.so.0.14' >&2\nexit 127\n"
    )
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert ccache_runs() is False
    assert _decide(tmp_path) is None


def test_no_ccache_on_path_gets_no_kept_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ccache_runs() is False
    assert _decide(tmp_path) is None


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache not installed (apt-get install ccache)")
def test_a_working_ccache_gets_the_kept_cache_under_the_work_dir(tmp_path: Path) -> None:
    assert ccache_runs() is True
    cache = _decide(tmp_path)
    assert cache is not None
    assert str(tmp_path / "work") in dict(cache.env)["CONDAPIPE_COMPILE_CACHE"]  # type: ignore[attr-defined]

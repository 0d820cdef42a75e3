"""A source that cannot be downloaded says where it comes from and how to hand it over instead.

The engines' own words for it ("Failed to download from URL", git's "Could not resolve host")
map to one diagnosis whose fix is --source DIR|TARBALL; a family build adds its source URL, and
for magma (whose upstream URL is plain http) the https URL and the sha256 from the data.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from channel_helpers import closed_port_url
from e2e_helpers import condapipe

from condapipe.engines.diagnose import diagnose_lines

ENGINE_LINES = [
    "PyRattlerBuildError: Failed to download from URL: Request failed after 3 retries",
    "fatal: unable to access 'https://github.com/pytorch/pytorch.git/': Could not resolve host: github.com",
]


@pytest.mark.parametrize("line", ENGINE_LINES)
def test_the_engines_download_failures_are_diagnosed_with_the_source_fix(line: str) -> None:
    found = diagnose_lines(["building ...", line])
    assert found and found[0].id == "source-fetch-failed"
    assert "--source DIR" in found[0].fix and "--source TARBALL" in found[0].fix


@pytest.mark.slow
def test_a_magma_build_without_network_names_the_https_url_and_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("cmake")
    pytest.importorskip("ninja")
    closed = closed_port_url()
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
    ):  # no network, whatever the machine has
        monkeypatch.setenv(name, closed)
    code, _, err = condapipe(
        "build", "magma", "--cuda", "13.0", "--arch", "9.0", "--build-tools", "wheels",
        "--engine", "rattler-build", "--force", cwd=tmp_path,
    )  # fmt: skip
    # The source is probed before anything builds (as --dry-run does), so the build stops there, with
    # the fix, before the engine's own download fails (--force does not skip it: it is not doctor's).
    assert code == 3, err
    last = " ".join(err.strip().splitlines()[-1:])
    assert "the source of magma-cuda130-2.6.1 cannot be downloaded" in last
    assert "the source is http://icl.utk.edu/projectsfiles/magma/downloads/magma-2.6.1.tar.gz" in last
    assert (
        "download https://icl.utk.edu/projectsfiles/magma/downloads/magma-2.6.1.tar.gz "
        "(sha256 6cd83808c6e8bc7a44028e05112b3ab4e579bcc73202ed14733f66661127e213)" in last
    )
    assert "then pass --source magma-2.6.1.tar.gz" in last
    assert not list((tmp_path / "channel").rglob("*.conda"))  # nothing half-published

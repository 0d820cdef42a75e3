"""Fixtures of the engine tests: a real Redis server (sccache's shared store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_helpers import redis_server


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[str]:
    """A Redis server on 127.0.0.1 for this test only (no persistence), stopped afterwards."""
    with redis_server(tmp_path / "redis") as url:
        yield url

"""A recipe folder or a setting that cannot be used is a usage error, not an internal one (issue 38, item 7).

`build RECIPE_DIR --dry-run` renders the user's recipe.yaml with rattler-build before anything is
solved: unclosed YAML, an empty file, a top-level list or an unknown anchor is one line naming the
file (exit 2), not the engine's raw dump under "internal error". `CONDAPIPE_CHANNEL_TIMEOUT` must be
a finite number of seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]


def _run(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv], cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


@pytest.mark.parametrize(
    "body",
    [
        "package:\n  name: x\n  version: [1, 2\n",
        "",
        "- a\n- b\n",
        "package:\n  name: *nowhere\n  version: '1'\n",
        "context:\n  v: &v '1'\npackage:\n  name: x\n  version: *v\n  bogus: {{\n",
    ],
    ids=["unclosed", "empty", "list", "unknown-anchor", "anchor-then-broken"],
)
def test_an_unparsable_recipe_yaml_is_one_line_naming_the_file(tmp_path: Path, body: str) -> None:
    recipe = tmp_path / "rec"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(body)

    done = _run(tmp_path, "build", "rec", "--dry-run", "--work-dir", "w")

    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "recipe.yaml" in lines[0], done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "1e9"])
def test_a_channel_timeout_that_is_not_a_finite_number_of_seconds_is_refused(
    tmp_path: Path, value: str
) -> None:
    done = _run(
        tmp_path, "build", "magma", "--cuda", "12.4", "--dry-run", env={"CONDAPIPE_CHANNEL_TIMEOUT": value}
    )

    assert done.returncode == 2, done.stderr
    assert "CONDAPIPE_CHANNEL_TIMEOUT" in done.stderr
    assert "internal error" not in done.stderr

"""A recipe directory build reads the same settings as a family build: condapipe.toml's [env]
reaches the recipe's build script as --env does, a flag still wins over the file, and a changed
value rebuilds (the env is one of the build step's inputs, as a family's is through its recipe)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import conda_package_handling.api as cph

GREETING_RECIPE = """\
package:
  name: greeting
  version: 0.1.0
build:
  number: 0
  script:
    env:
      GREETING: ${{ env.get("GREETING", default="unset") }}
    content:
      - mkdir -p $PREFIX/share
      - echo "greeting=$GREETING" > $PREFIX/share/greeting.txt
"""


def _build(project: Path, recipe: Path, *flags: str) -> str:
    argv = [sys.executable, "-c", "from condapipe.cli.main import main; main()", "build", str(recipe)]
    argv += ["--engine", "rattler-build", "--no-test", "--offline", "--output-dir", "chan", *flags]
    proc = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (package,) = (project / "chan").glob("*/greeting-0.1.0-*.conda")
    dest = project / f"unpacked-{len(list(project.glob('unpacked-*')))}"
    cph.extract(str(package), dest_dir=str(dest))
    return (dest / "share" / "greeting.txt").read_text()


def test_the_config_files_env_reaches_a_recipe_dir_build_and_a_flag_wins(tmp_path: Path) -> None:
    recipe = tmp_path / "greeting"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_text(GREETING_RECIPE)
    project = tmp_path / "project"
    project.mkdir()
    (project / "condapipe.toml").write_text('[env]\nGREETING = "from-config"\n')
    assert _build(project, recipe) == "greeting=from-config\n"
    assert _build(project, recipe, "--env", "GREETING=from-flag") == "greeting=from-flag\n"  # rebuilt
    assert _build(project, recipe) == "greeting=from-config\n"  # and back

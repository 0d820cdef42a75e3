"""`condapipe render` as a user drives it: errors, --dry-run, --json, --force, the variant matrix.

Every error is exit 2 with one line on stderr and nothing written, so scripts can tell a user
mistake from a failed build and never pick up a half-written recipe.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from render_helpers import load_yaml, v0_meta, variant_combos

from condapipe.cli.main import main


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


PYTORCH = ("render", "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.10")


PT = ("render", "pytorch", "--version", "2.4.1", "--python", "3.10")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("render", "tensorflow", "--cuda", "12.4"), "unknown package"),
        ((*PT, "--cuda", "10.7"), "unknown CUDA"),
        (("render", "pytorch", "--version", "9.9.9", "--cuda", "12.4", "--python", "3.10"), "pytorch"),
        (("render", "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.13"), "3.13"),
        ((*PT, "--cuda", "11.8", "--arch", "12.0"), "12.0"),
        ((*PT, "--cuda", "12.4", "--arch", "sm_9x"), "9x"),
        (("render", "magma", "--cuda", "cpu"), "cpu"),
        ((*PT, "--cuda", "12.4", "--blas", "atlas"), "atlas"),
    ],
)
def test_bad_spec_is_one_line_exit_2_and_writes_nothing(
    args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "recipe"
    result = invoke(*args, "-o", str(out))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert message in lines[0]
    assert "Traceback" not in result.output
    assert not out.exists()
    assert not list(tmp_path.glob(".recipe.*")), "temporary render dir left behind"


def test_non_empty_foreign_dir_is_refused_without_force(tmp_path: Path) -> None:
    out = tmp_path / "recipe"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    result = invoke(*PYTORCH, "-o", str(out))
    assert result.exit_code == 2
    # Besides the choice lines (the default arch list), one line: the error.
    said = [line for line in result.output.strip().splitlines() if not line.startswith("chose ")]
    assert "--force" in result.output and len(said) == 1, result.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]

    forced = invoke(*PYTORCH, "-o", str(out), "--force")
    assert forced.exit_code == 0, forced.output
    assert not (out / "notes.txt").exists() and (out / "meta.yaml").is_file()


def test_output_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "recipe"
    out.write_text("not a dir\n")
    result = invoke(*PYTORCH, "-o", str(out))
    assert result.exit_code == 2 and "not a directory" in result.output
    assert out.read_text() == "not a dir\n"


def test_dry_run_lists_files_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "recipe"
    result = invoke(*PYTORCH, "-o", str(out), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # the JSON alone on stdout; choice lines go to stderr
    assert data["dry_run"] is True
    names = {Path(f).name for f in data["files"]}
    assert {"meta.yaml", "build.sh", "conda_build_config.yaml", "recipe.yaml", "variants.yaml"} <= names
    assert data["spec"]["package"] == "pytorch"
    assert not out.exists()


def test_json_result_names_the_written_files(tmp_path: Path) -> None:
    out = tmp_path / "recipe"
    result = invoke(*PYTORCH, "-o", str(out), "--json")
    data = json.loads(result.stdout)
    assert data["dry_run"] is False and data["replaced"] is False
    assert sorted(Path(f).name for f in data["files"]) == sorted(p.name for p in out.iterdir())


def test_several_pythons_and_cudas_give_one_recipe_with_a_matrix(tmp_path: Path) -> None:
    out = tmp_path / "recipe"
    args = ("render", "pytorch", "--version", "2.4.1", "--python", "3.8", "--python", "3.12")
    result = invoke(*args, "--cuda", "11.8", "--cuda", "cpu", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert len(list(out.glob("meta.yaml"))) == 1 and len(list(out.glob("recipe.yaml"))) == 1
    cbc = load_yaml((out / "conda_build_config.yaml").read_text())
    assert cbc["python"] == ["3.8", "3.12"] and cbc["cuda_version"] == ["11.8", "cpu"]
    assert load_yaml((out / "variants.yaml").read_text())["zip_keys"] == cbc["zip_keys"]
    metas = {(v["python"], v["cuda_version"]): v0_meta(out, "linux-64", v) for v in variant_combos(cbc)}
    assert len(metas) == 4
    # numpy is pinned per Python (1.22.3 on 3.8, builder release/2.4, 2.0.0 on 3.12), magma and the CUDA run
    # constraint only in CUDA variants, the cpuonly mutex the other way round.
    assert "numpy 1.22.3.*" in metas["3.8", "cpu"]["requirements"]["host"]
    assert "numpy 2.0.0.*" in metas["3.12", "cpu"]["requirements"]["host"]
    assert "magma-cuda118" in metas["3.12", "11.8"]["requirements"]["host"]
    assert not any("magma" in d for d in metas["3.12", "cpu"]["requirements"]["host"])
    assert "pytorch-cuda >=11.8,<11.9" in metas["3.8", "11.8"]["requirements"]["run"]
    # PyTorch's mutex only constrains (it is in no channel but PyTorch's frozen one): nothing to install.
    constrained = {key: meta["requirements"]["run_constrained"] for key, meta in metas.items()}
    assert constrained["3.8", "11.8"] == ["pytorch-mutex ==1.0 cuda", "cpuonly <0"]
    assert constrained["3.8", "cpu"] == ["pytorch-mutex ==1.0 cpu", "cpuonly"]
    assert not any("mutex" in d for d in metas["3.8", "cpu"]["requirements"]["run"])


def test_local_checkout_source_and_extra_env_reach_both_formats(tmp_path: Path) -> None:
    checkout = tmp_path / "pytorch-src"
    checkout.mkdir()
    (checkout / "version.txt").write_text("2.4.1a0\n")  # --source is checked against --version
    out = tmp_path / "recipe"
    result = invoke(*PYTORCH, "--source", str(checkout), "--env", "USE_FLASH_ATTENTION=0", "-o", str(out))
    assert result.exit_code == 0, result.output
    (variant,) = variant_combos(load_yaml((out / "conda_build_config.yaml").read_text()))
    meta = v0_meta(out, "linux-64", variant)
    assert meta["source"]["path"] == str(checkout)
    assert load_yaml((out / "recipe.yaml").read_text())["source"]["path"] == str(checkout)
    assert 'export USE_FLASH_ATTENTION="0"' in (out / "build.sh").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("render", "pytorch", "--version", "2.4.1", "--cuda", "12.4", "--python", "3.10"), "-o DIR"),
        (("render", "-o", "recipe"), "no package given"),
    ],
)
def test_missing_package_or_output_is_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and message in result.output
    assert not Path("recipe").exists()


def test_config_file_supplies_the_spec_and_flags_override_it(tmp_path: Path) -> None:
    Path("condapipe.toml").write_text(
        'package = "pytorch"\nversion = "2.4.1"\npython = ["3.10", "3.11"]\ncuda = "12.4"\n'
    )
    result = invoke("render", "--cuda", "cpu", "-o", "recipe")
    assert result.exit_code == 0, result.output
    cbc = load_yaml(Path("recipe/conda_build_config.yaml").read_text())
    assert cbc["python"] == ["3.10", "3.11"] and cbc["cuda_version"] == ["cpu"]

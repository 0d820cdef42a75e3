"""`condapipe build pytorch … --with torchvision`: magma -> pytorch -> torchvision as one plan.

The RTX 5090 seed (PyTorch 2.4.1 + torchvision 0.19.1, Python 3.8, CUDA 12.8, arch 12.0) plans as
one set: torchvision's build waits for the pytorch it is built against, uses the same arch list
and pins that build's number; CI jobs and `--variant` see the same jobs.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from condapipe.cli.main import main
from condapipe.package.io import PackageInfo
from condapipe.publish.upload_order import upload_order

SEED = ("pytorch", "--version", "2.4.1", "--python", "3.8", "--cuda", "12.8", "--arch", "12.0")


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def dry_run(tmp_path: Path, *args: str) -> dict:
    result = invoke(
        "build",
        *args,
        "--dry-run",
        "--json",
        "--output-dir",
        str(tmp_path / "ch"),
        "--work-dir",
        str(tmp_path / "w"),
    )
    plan = json.loads(result.stdout)
    assert result.exit_code == (0 if plan["doctor"]["ok"] else 3), result.stderr
    return plan


def packages(plan: dict) -> list[str]:
    return list(dict.fromkeys(s["id"].split(":", 1)[1] for s in plan["steps"]))


def step(plan: dict, step_id: str) -> dict:
    return next(s for s in plan["steps"] if s["id"] == step_id)


def test_rtx_5090_seed_plans_magma_pytorch_torchvision_as_one_set(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, *SEED, "--with", "torchvision")
    assert packages(plan) == [
        "magma-cuda128-2.6.1",
        "pytorch-2.4.1-py3.8-cuda12.8",
        "torchvision-0.19.1-py3.8-cuda12.8",
    ]
    build = step(plan, "build:torchvision-0.19.1-py3.8-cuda12.8")
    assert "publish:pytorch-2.4.1-py3.8-cuda12.8" in build["needs"]
    spec = step(plan, "render:torchvision-0.19.1-py3.8-cuda12.8")["inputs"]["spec"]
    assert spec["cuda_variants"] == [{"cuda": "12.8", "cudnn": "9.7.1", "archs": "12.0"}]
    assert spec["pythons"] == ["3.8"] and spec["against"] == [["pytorch", "0"]]
    verify = step(plan, "verify:torchvision-0.19.1-py3.8-cuda12.8")
    assert verify["inputs"]["archs"] == "12.0"


def test_without_with_the_plan_is_unchanged(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, *SEED)
    assert packages(plan) == ["magma-cuda128-2.6.1", "pytorch-2.4.1-py3.8-cuda12.8"]
    assert "against" not in step(plan, "render:pytorch-2.4.1-py3.8-cuda12.8")["inputs"]["spec"]


def test_each_torchvision_variant_needs_the_pytorch_variant_it_is_built_against(tmp_path: Path) -> None:
    plan = dry_run(
        tmp_path, "pytorch", "--version", "2.6.0", "--python", "3.10", "--python", "3.12",
        "--cuda", "12.6", "--cuda", "cpu", "--with", "torchvision",
    )  # fmt: skip
    vision = [p for p in packages(plan) if p.startswith("torchvision-")]
    assert vision == [
        "torchvision-0.21.0-py3.10-cuda12.6",
        "torchvision-0.21.0-py3.12-cuda12.6",
        "torchvision-0.21.0-py3.10-cpu",
        "torchvision-0.21.0-py3.12-cpu",
    ]
    for label in vision:
        _, _, py, cuda = label.split("-")
        needs = step(plan, f"build:{label}")["needs"]
        assert [n for n in needs if n.startswith("publish:")] == [f"publish:pytorch-2.6.0-{py}-{cuda}"]
    # torchvision's own steps come after every pytorch step: the order a resumed run follows too
    ids = [s["id"] for s in plan["steps"]]
    assert max(i for i, s in enumerate(ids) if ":pytorch-" in s) < min(
        i for i, s in enumerate(ids) if ":torchvision-" in s
    )


def test_ci_jobs_and_variant_ids_include_the_companion(tmp_path: Path) -> None:
    result = invoke("plan", *SEED, "--with", "torchvision", "--emit", "json")
    assert result.exit_code == 0, result.output
    jobs = {job["id"]: job for job in json.loads(result.stdout)["variants"]}
    assert list(jobs) == [
        "magma-cuda128-2.6.1",
        "pytorch-2.4.1-py3.8-cuda12.8",
        "torchvision-0.19.1-py3.8-cuda12.8",
    ]
    vision = jobs["torchvision-0.19.1-py3.8-cuda12.8"]
    assert vision["needs"] == ["pytorch-2.4.1-py3.8-cuda12.8"]
    argv = vision["run"]
    assert argv[:3] == ["condapipe", "build", "pytorch"] and argv[argv.index("--with") :][:2] == [
        "--with",
        "torchvision",
    ]
    assert argv[argv.index("--variant") + 1] == "torchvision-0.19.1-py3.8-cuda12.8"
    one = dry_run(tmp_path, *SEED, "--with", "torchvision", "--variant", "torchvision-0.19.1-py3.8-cuda12.8")
    assert packages(one) == ["torchvision-0.19.1-py3.8-cuda12.8"]


def test_with_a_family_not_built_against_the_package_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("build", *SEED, "--with", "magma", "--dry-run", "--work-dir", str(tmp_path / "w"))
    assert result.exit_code == 2
    assert "--with magma: magma is built against no other family, not pytorch" in result.stderr
    result = invoke("build", "torchvision", "--version", "0.21.0", "--cuda", "cpu", "--python", "3.11",
                    "--with", "torchvision", "--dry-run", "--work-dir", str(tmp_path / "w"))  # fmt: skip
    assert result.exit_code == 2
    assert "torchvision is built against pytorch, not torchvision" in result.stderr


def test_a_torch_release_without_a_torchvision_pair_says_so(tmp_path: Path) -> None:
    result = invoke(
        "plan", "pytorch", "--version", "1.8.0", "--cuda", "cpu", "--python", "3.8", "--with", "torchvision"
    )
    assert result.exit_code == 2
    assert "no torchvision release pairs with pytorch 1.8.0" in result.stderr
    assert result.stderr.rstrip().endswith("the nearest that does: --version 1.13.0")


def test_upload_order_keeps_torchvision_after_the_torch_it_needs() -> None:
    def pkg(name: str, *depends: str) -> PackageInfo:
        return PackageInfo(Path(f"/x/{name}-1-0.conda"), name, "1", "0", 0, "linux-64", depends)

    batch = [
        pkg("torchvision", "pytorch ==2.4.1 py3.8_cuda12.8_cudnn9.7.1_0", "libpng"),
        pkg("pytorch", "pytorch-mutex ==1.0 cuda"),
        pkg("magma-cuda128"),
        pkg("pytorch-mutex"),
    ]
    assert [p.name for p in upload_order(batch)] == [
        "pytorch-mutex",
        "magma-cuda128",
        "pytorch",
        "torchvision",
    ]


def test_the_config_files_torchvision_source_is_the_companions_own(tmp_path: Path) -> None:
    """On a machine without network the companion's release comes from a local tree or archive
    (Debian's orig tarball of 0.21.0, say): [packages.torchvision] source, not pytorch's --source."""
    vision = tmp_path / "vision-0.21.0"
    vision.mkdir()
    (vision / "version.txt").write_text("0.21.0\n")
    config = tmp_path / "condapipe.toml"
    config.write_text(f'[packages.torchvision]\nsource = "{vision}"\n')
    plan = dry_run(tmp_path, "pytorch", "--version", "2.6.0", "--python", "3.12", "--cuda", "12.6",
                   "--with", "torchvision", "--config", str(config))  # fmt: skip
    torchvision = step(plan, "render:torchvision-0.21.0-py3.12-cuda12.6")["inputs"]["spec"]
    assert torchvision["source"]["kind"] == "path"  # recorded by its files' fingerprint
    assert step(plan, "render:pytorch-2.6.0-py3.12-cuda12.6")["inputs"]["spec"]["source"]["kind"] == "git"
    # a source that is not there: one line before anything runs
    config.write_text(f'[packages.torchvision]\nsource = "{tmp_path / "missing"}"\n')
    result = invoke("build", "pytorch", "--version", "2.6.0", "--python", "3.12", "--cuda", "12.6",
                    "--with", "torchvision", "--config", str(config), "--dry-run",
                    "--output-dir", str(tmp_path / "ch"), "--work-dir", str(tmp_path / "w"))  # fmt: skip
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert errors == [f"error: [packages.torchvision] source {tmp_path / 'missing'}: no such directory "
                      "(or source archive: .tar.gz, .tgz, .tar.xz, .txz, .tar.bz2, .tbz2, .zip)"]  # fmt: skip

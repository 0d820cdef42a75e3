"""The (PyTorch release, CUDA) pairs condapipe offers: upstream's, and beyond them only with evidence.

A pair upstream built is offered silently. A pair beyond upstream is offered only when
pytorch.yaml's `compiles_beyond_upstream` (or the release NVIDIA built for a JetPack) says why it
compiles, and the user is told that in one line; every other pair is refused in one line naming
the nearest pairs that work, before any command writes anything: render, plan, build --dry-run,
doctor, config show, for pytorch, libtorch and torchvision alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from condapipe.buildspec import pairs
from condapipe.buildspec.build_spec import PLATFORMS
from condapipe.cli.main import main
from condapipe.facts import tables
from condapipe.render import patch_catalog


def _beyond_upstream() -> list[dict]:
    return list(tables._load("pytorch.yaml")["compiles_beyond_upstream"])


def _covered(rule: dict) -> list[tuple[str, str]]:
    return [
        (v, c)
        for v in tables.pytorch_versions()
        for c in tables.cuda_versions()
        if Version(v) in SpecifierSet(rule["pytorch"]) and Version(c) in SpecifierSet(rule["cuda"])
    ]


def test_every_pair_upstream_built_is_offered_without_a_note() -> None:
    for version in tables.pytorch_versions():
        for cuda in (*tables.pytorch_info(version).cudas, tables.CPU):
            verdict = pairs.pair_verdict(version, cuda)
            if verdict.kind == pairs.REFUSED:  # only a known break may refuse what upstream built
                pytest.fail(f"{version} + {cuda}: {verdict.line()}")
            assert verdict.kind == pairs.UPSTREAM and verdict.line() == "", (version, cuda)


@pytest.mark.parametrize("rule", _beyond_upstream(), ids=lambda r: f"{r['pytorch']}+{r['cuda']}")
def test_each_entry_beyond_upstream_covers_real_pairs_and_says_why(rule: dict) -> None:
    covered = _covered(rule)
    beyond = [(v, c) for v, c in covered if c not in tables.pytorch_info(v).cudas]
    assert beyond, "the entry vouches for no pair upstream did not build: dead data"
    assert len(" ".join(str(rule["evidence"]).split())) > 40  # a real sentence, not a placeholder
    assert set(rule) <= {"pytorch", "cuda", "evidence", "patches"}


@pytest.mark.parametrize(
    "rule", [r for r in _beyond_upstream() if r.get("patches")], ids=lambda r: f"{r['pytorch']}+{r['cuda']}"
)
def test_the_patches_an_entry_names_are_selected_for_each_of_its_pairs(rule: dict) -> None:
    catalog = patch_catalog.load_catalog()
    for version, cuda in _covered(rule):
        for platform in PLATFORMS:
            chosen = {
                e.id for e in patch_catalog.applicable("pytorch", version, cuda, platform, catalog=catalog)
            }
            missing = set(rule["patches"]) - chosen
            assert not missing, (version, cuda, platform, missing)


def test_an_accepted_pair_beyond_upstream_says_which_patches_make_it_compile() -> None:
    verdict = pairs.pair_verdict("2.4.1", "12.8")
    assert verdict.kind == pairs.PATCHED
    assert verdict.patches == ("pytorch-select-compute-arch-two-digit-major-2.4",)
    assert verdict.line().startswith(
        "pytorch 2.4.1 was not built upstream for CUDA 12.8 (upstream: 11.8 12.1 12.4); it compiles with "
        "the catalog's patches pytorch-select-compute-arch-two-digit-major-2.4: "
    )


def test_an_accepted_pair_beyond_upstream_without_patches_says_what_shows_it_compiles() -> None:
    line = pairs.pair_verdict("1.8.0", "11.0").line()
    assert line.startswith("pytorch 1.8.0 was not built upstream for CUDA 11.0 (upstream: 10.1 10.2 11.1); ")
    assert "it compiles as rendered: conda-forge built pytorch 1.8.0 for CUDA 11.0" in line


def test_a_release_nvidia_built_for_a_jetpack_is_offered_with_that_jetpack_cuda() -> None:
    verdict = pairs.pair_verdict("2.5.0", "12.6")
    assert verdict.kind == pairs.EVIDENCE and "NVIDIA built it for JetPack 6.1" in verdict.why
    assert not pairs.offered("2.5.1", "12.2")  # another release with another JetPack's CUDA: no


def test_a_pair_nothing_vouches_for_is_refused_naming_the_nearest_pairs() -> None:
    verdict = pairs.pair_verdict("2.4.1", "12.6")
    assert not verdict.offered and verdict.unproven
    assert verdict.line() == (
        "pytorch 2.4.1 is not offered with CUDA 12.6: upstream built it for CUDA 11.8 12.1 12.4 only, "
        "and nothing shows that it compiles with 12.6 (no evidence or catalog patch for the pair in "
        "pytorch.yaml compiles_beyond_upstream); nearest that compiles: --version 2.4.1 --cuda 12.4 "
        "or --version 2.6.0 --cuda 12.6"
    )


def test_1_x_with_cuda_12_or_13_is_refused_for_the_api_cuda_12_removed() -> None:
    for version, cuda in (("1.8.0", "12.8"), ("1.13.1", "12.1"), ("1.8.0", "13.0")):
        line = pairs.pair_verdict(version, cuda).line()
        assert line.startswith(f"pytorch {version} cannot be compiled with CUDA {cuda}: CUDA 12 removed "), (
            line
        )
        assert "cudaProfilerInitialize" in line
    assert pairs.pair_verdict("1.8.0", "12.8").nearest == (
        "--version 1.8.0 --cuda 11.1",
        "--version 2.7.0 --cuda 12.8",
    )


def test_every_nearest_pair_a_refusal_names_is_offered() -> None:
    for version in tables.pytorch_versions():
        for cuda in tables.cuda_versions():
            verdict = pairs.pair_verdict(version, cuda)
            if verdict.offered:
                continue
            assert verdict.nearest, (version, cuda)
            for hint in verdict.nearest:
                _, v, _, c = hint.split()
                assert pairs.offered(v, c), (version, cuda, hint)


def _one_line_exit_2(result, expected: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {expected}"), result.stderr
    assert "Traceback" not in result.output


REFUSED_COMMANDS = [
    (
        ["render", "pytorch", "--version", "1.8.0", "--cuda", "12.8", "--python", "3.8", "-o", "out"],
        "pytorch 1.8.0",
    ),
    (
        [
            "plan",
            "pytorch",
            "--version",
            "1.8.0",
            "--cuda",
            "12.8",
            "--python",
            "3.8",
            "--emit",
            "github-actions",
            "-o",
            "plan.yml",
        ],
        "pytorch 1.8.0",
    ),
    (
        ["plan", "pytorch", "--version", "2.4.1", "--cuda", "12.6", "--python", "3.10", "--emit", "json"],
        "pytorch 2.4.1",
    ),
    (
        ["build", "pytorch", "--version", "1.8.0", "--cuda", "12.8", "--python", "3.8", "--dry-run"],
        "pytorch 1.8.0",
    ),
    (["build", "pytorch", "--version", "2.4.1", "--cuda", "12.6", "--python", "3.10"], "pytorch 2.4.1"),
    (["doctor", "pytorch", "--version", "1.8.0", "--cuda", "12.8", "--python", "3.8"], "pytorch 1.8.0"),
    (
        ["config", "show", "pytorch", "--version", "2.4.1", "--cuda", "12.6", "--python", "3.10"],
        "pytorch 2.4.1",
    ),
    (["render", "libtorch", "--version", "1.13.1", "--cuda", "12.4", "-o", "out"], "pytorch 1.13.1"),
    (["build", "libtorch", "--version", "2.4.1", "--cuda", "12.6", "--dry-run"], "pytorch 2.4.1"),
    (
        ["render", "torchvision", "--version", "0.14.1", "--cuda", "12.1", "--python", "3.10", "-o", "out"],
        "pytorch 1.13.1",
    ),
    (
        [
            "build",
            "pytorch",
            "--version",
            "2.4.1",
            "--cuda",
            "12.6",
            "--python",
            "3.10",
            "--with",
            "torchvision",
        ],
        "pytorch 2.4.1",
    ),
]


@pytest.mark.parametrize(
    ("args", "expected"), REFUSED_COMMANDS, ids=lambda a: " ".join(a) if isinstance(a, list) else ""
)
def test_a_refused_pair_stops_every_command_before_it_writes_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    result = CliRunner().invoke(main, args, env={"CONDAPIPE_WORK_DIR": str(work)})
    _one_line_exit_2(result, expected)
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_an_accepted_pair_beyond_upstream_renders_and_says_why_it_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = [
        "render",
        "pytorch",
        "--version",
        "2.4.1",
        "--cuda",
        "12.8",
        "--python",
        "3.8",
        "--arch",
        "12.0",
        "-o",
        "out",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "was not built upstream" in line]
    assert notes == [f"warning: {pairs.pair_verdict('2.4.1', '12.8').line()}"]
    assert "building it anyway" not in result.stderr
    assert (tmp_path / "out").is_dir()


def test_a_cuda_no_release_was_built_for_upstream_picks_the_newest_release_that_compiles_with_it() -> None:
    from condapipe.buildspec.defaults import fill_defaults

    settings, choices = fill_defaults("pytorch", {"cuda": ["12.2"]}, toolkits=lambda: (), python="3.10")
    assert settings["version"] == "2.3.0"  # NVIDIA's build for JetPack 6.0, the only one with CUDA 12.2
    assert choices[0].line("pytorch") == (
        "chose pytorch 2.3.0: no release was built upstream for CUDA 12.2; newest that compiles with it: "
        "NVIDIA built it for JetPack 6.0 (CUDA 12.2; jetson.yaml) (--version to change)"
    )


@pytest.mark.parametrize(
    ("args", "note"),
    [
        # the seeds' pairs: libtorch 2.0.x + 11.7 is upstream's (no note); the others say why they compile
        (["libtorch", "--version", "2.0.1", "--cuda", "11.7"], None),
        (
            ["pytorch", "--version", "1.13.0", "--cuda", "11.8", "--python", "3.10"],
            "it compiles as rendered: real 1.13.1 tree with Debian's nvcc 11.8",
        ),
        (
            ["torchvision", "--version", "0.14.1", "--cuda", "11.8", "--python", "3.10"],
            "pytorch 1.13.1 was not built upstream for CUDA 11.8",
        ),
        (
            ["pytorch", "--version", "1.8.0", "--cuda", "11.0", "--python", "3.8"],
            "it compiles as rendered: conda-forge built pytorch 1.8.0 for CUDA 11.0",
        ),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_the_seeds_pairs_are_offered_with_their_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], note: str | None
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "show", *args])
    assert result.exit_code == 0, result.output
    notes = [
        line for line in result.stderr.splitlines() if "upstream" in line and line.startswith("warning:")
    ]
    if note is None:
        assert notes == []
    else:
        assert len(notes) == 1 and note in notes[0], notes

"""Arch lists: every spelling users and upstream scripts use parses to one canonical list, and
each CUDA version accepts exactly the archs its nvcc can compile."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from condapipe.errors import UsageError
from condapipe.facts.arch import (
    Arch,
    ArchList,
    accepted_archs,
    cuda_accepts,
    parse_arch_list,
    parse_token,
)
from condapipe.facts.tables import cuda_versions

KNOWN_PLAIN = [a for v in cuda_versions() for a in accepted_archs(v) if not a.suffix]


def test_pytorch_syntax_with_ptx_and_space_separated_lists():
    archs = parse_arch_list("8.0;8.6+PTX")
    assert archs.torch_arch_list() == "8.0;8.6+PTX"
    assert archs.gencode_flags() == (
        "-gencode arch=compute_80,code=sm_80",
        "-gencode arch=compute_86,code=sm_86",
        "-gencode arch=compute_86,code=compute_86",
    )
    assert archs.sass() == {"sm_80", "sm_86"}
    assert archs.ptx() == {"compute_86"}
    assert parse_arch_list("7.0 7.5").torch_arch_list() == "7.0;7.5"
    assert parse_arch_list("7.0, 7.5").torch_arch_list() == "7.0;7.5"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sm_90", "9.0"),
        ("SM_90A", "9.0a"),
        ("sm_120", "12.0"),
        ("9.0a", "9.0a"),
        ("12.0", "12.0"),
        ("10.0f", "10.0f"),
        ("8.6+ptx", "8.6+PTX"),
    ],
)
def test_single_arch_spellings(text, expected):
    assert parse_arch_list(text).torch_arch_list() == expected


def test_arch_properties_match_nvcc_and_pytorch_names():
    arch = Arch(9, 0, "a", ptx=True)
    assert (arch.number, arch.sm, arch.compute, arch.torch_name) == (90, "sm_90a", "compute_90a", "9.0a+PTX")


def test_duplicates_merge_and_the_list_is_sorted():
    archs = parse_arch_list("9.0;8.6;8.6+PTX;sm_86;8.0")
    assert archs.torch_arch_list() == "8.0;8.6+PTX;9.0"
    assert archs.images == 4


def test_family_names_expand_to_what_the_cuda_can_compile():
    assert parse_arch_list("Ampere", cuda="11.0").torch_arch_list() == "8.0"
    assert parse_arch_list("ampere", cuda="11.8").torch_arch_list() == "8.0;8.6;8.7"
    assert parse_arch_list("Hopper", cuda="12.4").torch_arch_list() == "9.0"
    assert parse_arch_list("Blackwell", cuda="12.8").torch_arch_list() == "10.0;10.1;12.0"
    assert parse_arch_list("Blackwell", cuda="13.0").torch_arch_list() == "10.0;10.3;11.0;12.0;12.1"
    assert parse_arch_list("Ada;Hopper+PTX", cuda="12.1").torch_arch_list() == "8.9;9.0+PTX"


@pytest.mark.parametrize(
    ("text", "cuda", "fragment"),
    [
        ("12.0", "11.8", "CUDA 11.8 cannot compile arch 12.0; it accepts: 3.5 3.7"),
        ("3.5", "12.4", "CUDA 12.4 cannot compile arch 3.5; it accepts: 5.0"),
        ("7.0", "13.0", "it accepts: 7.5 8.0"),
        ("10.1", "13.0", "cannot compile arch 10.1"),  # renamed 11.0 in CUDA 13
        ("11.0", "12.8", "cannot compile arch 11.0"),
        ("9.0a", "11.8", "cannot compile arch 9.0a"),  # "a" targets start with CUDA 12.0
        ("10.0f", "12.8", "cannot compile arch 10.0f"),  # "f" targets start with CUDA 12.9
        ("Blackwell", "12.4", "cannot compile any arch of that family"),
    ],
)
def test_archs_the_cuda_cannot_compile_are_rejected_with_the_valid_choices(text, cuda, fragment):
    with pytest.raises(UsageError) as err:
        parse_arch_list(text, cuda=cuda)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty arch list"),
        ("  ;; ", "empty arch list"),
        ("8.x", "cannot parse arch '8.x'"),
        ("compute_80", "cannot parse arch"),
        ("4.0", "unknown compute capability 4.0"),
        ("8.6a", "'a' variants start at 9.0"),
        ("9.0f", "'f' variants start at 10.0"),
        ("10.0;10.0f", "produce the same SASS"),
    ],
)
def test_malformed_arch_lists_are_one_line_usage_errors(text, fragment):
    with pytest.raises(UsageError) as err:
        parse_arch_list(text)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_sass_only_drops_ptx_for_magma():
    archs = parse_arch_list("8.0;9.0+PTX").sass_only()
    assert archs.ptx() == frozenset()
    assert archs.gencode_flags() == (
        "-gencode arch=compute_80,code=sm_80",
        "-gencode arch=compute_90,code=sm_90",
    )


# ------------------------------------------------------------------ property-based

arch_strategy = st.builds(
    lambda base, ptx: Arch(base.major, base.minor, "", ptx),
    st.sampled_from(KNOWN_PLAIN),
    st.booleans(),
)


def _spell(arch: Arch, style: int) -> str:
    ptx = "+PTX" if arch.ptx else ""
    if style == 0:
        return arch.capability + ptx
    if style == 1:
        return f"sm_{arch.number}" + ptx.lower()
    return arch.capability.upper() + ptx.lower()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(arch_strategy, st.integers(0, 2)), min_size=1, max_size=12),
    st.sampled_from([";", " ", ",", " ; "]),
)
def test_any_spelling_and_separator_round_trips_through_torch_arch_list(items, sep):
    text = sep.join(_spell(a, style) for a, style in items)
    parsed = parse_arch_list(text)
    # canonical text parses back to the same list, and sass/ptx agree with the inputs
    assert parse_arch_list(parsed.torch_arch_list()) == parsed
    assert parsed.sass() == {a.sm for a, _ in items}
    assert parsed.ptx() == {a.compute for a, _ in items if a.ptx}
    numbers = [a.number for a in parsed]
    assert numbers == sorted(set(numbers))
    assert parsed.images == len(parsed.sass()) + len(parsed.ptx())
    assert len(parsed.gencode_flags()) == parsed.images


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(cuda_versions()), st.lists(st.sampled_from(KNOWN_PLAIN), min_size=1, max_size=8))
def test_validation_against_a_cuda_accepts_exactly_its_compilable_archs(cuda, archs):
    text = ";".join(a.capability for a in archs)
    if all(cuda_accepts(cuda, a) for a in archs):
        assert parse_arch_list(text, cuda=cuda).sass() == {a.sm for a in archs}
    else:
        with pytest.raises(UsageError, match=f"CUDA {cuda} cannot compile arch"):
            parse_arch_list(text, cuda=cuda)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.;+ PTXsmaf_x,", max_size=20))
def test_arbitrary_text_either_parses_or_raises_usage_error(text):
    try:
        result = parse_arch_list(text)
    except UsageError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(result, ArchList) and len(result) >= 1


def test_parse_token_reads_sm_and_dotted_forms_identically():
    assert parse_token("sm_86") == parse_token("8.6")
    assert parse_token("sm_121a") == Arch(12, 1, "a")


@st.composite
def cuda_and_archs(draw):
    """A CUDA version and a subset of what it compiles (suffixed archs included, no X/Xf pair)."""
    cuda = draw(st.sampled_from(cuda_versions()))
    accepted = accepted_archs(cuda)
    chosen = draw(st.lists(st.sampled_from(accepted), min_size=1, max_size=10, unique=True))
    fam = {(a.major, a.minor) for a in chosen if a.suffix == "f"}
    chosen = [a for a in chosen if a.suffix or (a.major, a.minor) not in fam]
    ptx = draw(st.sets(st.integers(0, len(chosen) - 1), max_size=2))
    return cuda, [Arch(a.major, a.minor, a.suffix, i in ptx) for i, a in enumerate(chosen)]


@settings(max_examples=200, deadline=None)
@given(cuda_and_archs(), st.booleans())
def test_every_compilable_selection_round_trips_for_its_cuda(case, sm_style):
    cuda, archs = case
    spelled = [(a.sm + ("+PTX" if a.ptx else "")) if sm_style else a.torch_name for a in archs]
    parsed = parse_arch_list(";".join(spelled), cuda=cuda)
    assert parse_arch_list(parsed.torch_arch_list(), cuda=cuda) == parsed
    assert parsed.sass() == {a.sm for a in archs}
    assert parsed.ptx() == {a.compute for a in archs if a.ptx}
    for flag in parsed.gencode_flags():
        arch, code = flag.removeprefix("-gencode arch=").split(",code=")
        assert code in (arch, arch.replace("compute_", "sm_"))

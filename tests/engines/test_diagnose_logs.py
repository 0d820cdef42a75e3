"""Build-log diagnosis: a failed build names the known cause and its fix, from real log excerpts.

The excerpts under tests/data/logs/ are real compiler/CMake/linker output (see their README for
how each was produced); the rules that match them are data in pipeline/condapipe/data/diagnoses.yaml.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from condapipe.engines.diagnose import _parse_rules, diagnose_file, diagnose_lines, load_rules, summary

LOGS = Path(__file__).parent.parent / "data" / "logs"

EXPECTED = {
    "relocation-truncated.log": ("relocation-overflow", "BUILD_SPLIT_CUDA"),
    "unknown-cuda-arch.log": ("unknown-cuda-arch", "patch"),
    "magma-header.log": ("magma-header-missing", "build magma first"),
    "oom-killed-cc1plus.log": ("out-of-memory", "MAX_JOBS"),
    "oom-virtual-memory.log": ("out-of-memory", "MAX_JOBS"),
    "stale-cmake-cache-moved.log": ("stale-build-cache", "remove the stale build directory"),
    "stale-cmake-cache-source.log": ("stale-build-cache", "remove the stale build directory"),
    "cmake4-policy.log": ("cmake4-policy", "CMAKE_POLICY_VERSION_MINIMUM=3.5"),
    "unsupported-gnu-version.log": ("unsupported-gnu-version", "install a gcc within the range"),
    "numpy-missing.log": ("numpy-missing", "add numpy"),
    "msvc-lnk1161.log": ("msvc-lnk1161", "17.4.3"),
    "nvcc-version-mismatch.log": ("nvcc-version-mismatch", "put the requested toolkit first on PATH"),
    "unresolved-dependency.log": ("unresolved-dependency", "build the dependency first"),
    "no-candidates-cmake.log": ("unresolved-dependency", "add the channel that has it"),
    # rattler-build 0.73 with the network cut (tests/engines/test_source_fetch_failure.py)
    "source-download-failed.log": ("source-fetch-failed", "--source TARBALL"),
}


@pytest.mark.parametrize("log_name", sorted(EXPECTED))
def test_each_known_failure_is_named_with_its_fix(log_name: str) -> None:
    rule_id, fix_words = EXPECTED[log_name]
    found = diagnose_file(LOGS / log_name)
    assert [d.id for d in found] == [rule_id]
    assert fix_words in found[0].fix
    # The matched line is reported so the user can find it in a huge log.
    line = (LOGS / log_name).read_text().splitlines()[found[0].line_no - 1]
    assert found[0].line == line.strip()


def test_every_shipped_rule_is_exercised_by_a_real_log() -> None:
    assert {rule.id for rule in load_rules()} == {rule_id for rule_id, _ in EXPECTED.values()}


def test_a_successful_build_log_gets_no_diagnosis() -> None:
    assert diagnose_file(LOGS / "clean-cuda-smoke-build.log") == []
    assert summary([]) is None


def test_several_causes_are_reported_in_rule_priority_order() -> None:
    # An OOM-killed compile usually leaves a "relocation"-free but noisy log; when two known
    # failures appear, the root cause listed first in the data file is reported first.
    lines = (LOGS / "relocation-truncated.log").read_text().splitlines()
    lines += (LOGS / "oom-killed-cc1plus.log").read_text().splitlines()
    found = diagnose_lines(lines)
    assert [d.id for d in found] == ["out-of-memory", "relocation-overflow"]
    text = summary(found)
    assert text is not None
    assert text.startswith("compiler ran out of memory:")
    assert "also seen: binary too large to link" in text


def test_each_rule_reports_its_first_matching_line_only() -> None:
    lines = ["ok", "g++: fatal error: Killed signal terminated program cc1plus", "virtual memory exhausted"]
    (only,) = diagnose_lines(lines)
    assert only.line_no == 2


def test_rules_are_data_and_new_ones_need_no_code() -> None:
    rules = _parse_rules(
        "diagnoses:\n"
        "  - id: disk-full\n    title: disk full\n    patterns: ['No space left on device']\n"
        "    cause: the disk filled up\n    fix: free space under the work dir\n"
    )
    (found,) = diagnose_lines(["cp: error writing 'x': No space left on device"], rules)
    assert (found.id, found.fix) == ("disk-full", "free space under the work dir")

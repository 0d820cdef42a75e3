"""Each family's `env_check:` (what `condapipe env` runs in a new environment) is well formed: the
Python checks compile, program checks name a program, file checks name files; the installed
package names map to their families. The checks themselves run for real in
tests/cli/test_env_and_clean.py (cuda-smoke, built here).
"""

from __future__ import annotations

import pytest

from condapipe.facts.families import family_facts, known_packages
from condapipe.plan.smoke_check import checked_families

FAMILIES = sorted(known_packages())


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_states_a_well_formed_check(family: str) -> None:
    check = family_facts(family).get("env_check")
    assert isinstance(check, dict) and len(check) == 1, f"{family}: one of python, argv or files"
    kind, value = next(iter(check.items()))
    if kind == "python":
        compile(value, f"{family} env_check", "exec")
        assert "sys.exit(2)" in value or "cuda" not in value.lower()  # no CUDA here: exit 2, said plainly
    elif kind == "argv":
        assert value and all(isinstance(a, str) for a in value)
    else:
        assert kind == "files" and value and all(not f.startswith("/") and ".." not in f for f in value)


def test_package_names_map_to_the_families_whose_check_runs() -> None:
    names = ["pytorch", "torchvision", "magma-cuda124", "libtorch", "cuda-smoke", "numpy"]
    assert checked_families(names) == ("pytorch", "torchvision", "magma", "libtorch", "cuda-smoke")
    assert checked_families(["pytorch", "pytorch"]) == ("pytorch",)

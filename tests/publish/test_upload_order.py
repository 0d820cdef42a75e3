"""Upload order: nothing is published before what it needs from the same batch."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from condapipe.package.io import PackageInfo
from condapipe.publish.upload_order import rank, upload_order


def pkg(name: str, *depends: str, version: str = "1.0") -> PackageInfo:
    return PackageInfo(
        Path(f"/x/{name}-{version}-0.conda"), name, version, "0", 0, "linux-64", tuple(depends)
    )


def names(pkgs: list[PackageInfo]) -> list[str]:
    return [p.name for p in pkgs]


def test_magma_before_pytorch_and_metapackages_first():
    batch = [
        pkg("torchvision", "pytorch"),
        pkg("pytorch", "pytorch-mutex 1.0 cuda"),
        pkg("magma-cuda121"),
        pkg("cpuonly", "pytorch-mutex 1.0 cpu"),
        pkg("pytorch-mutex"),
    ]
    assert names(upload_order(batch)) == [
        "pytorch-mutex",
        "cpuonly",
        "magma-cuda121",
        "pytorch",
        "torchvision",
    ]


def test_a_dependency_goes_first_even_when_its_rank_is_later():
    # zlib-ng has the default rank, magma a low one; magma depends on it, so zlib-ng goes first
    assert names(upload_order([pkg("magma-cuda118", "zlib-ng >=2"), pkg("zlib-ng")])) == [
        "zlib-ng",
        "magma-cuda118",
    ]


def test_the_rank_table_comes_from_data():
    assert (
        rank("_pytorch_select")
        < rank("cpuonly")
        < rank("magma-cuda130")
        < rank("pytorch")
        < rank("torchaudio")
    )
    assert rank("something-else") == 50


def test_a_dependency_cycle_still_uploads_every_package():
    assert sorted(names(upload_order([pkg("a", "b"), pkg("b", "a"), pkg("c")]))) == ["a", "b", "c"]


@given(
    st.lists(
        st.sampled_from(["pytorch", "magma-cuda121", "pytorch-mutex", "cpuonly", "torchvision", "libx"]),
        min_size=1,
        max_size=8,
        unique=True,
    ),
    st.randoms(),
)
def test_order_respects_every_in_batch_dependency_whatever_the_input_order(chosen, rnd: random.Random):
    deps = {"pytorch": ("pytorch-mutex", "libx"), "torchvision": ("pytorch",), "cpuonly": ("pytorch-mutex",)}
    batch = [pkg(n, *deps.get(n, ())) for n in chosen]
    rnd.shuffle(batch)
    order = names(upload_order(batch))
    assert sorted(order) == sorted(chosen)
    for name in order:
        for dep in deps.get(name, ()):
            if dep in order:
                assert order.index(dep) < order.index(name)
    assert order == names(upload_order(list(reversed(batch))))  # deterministic

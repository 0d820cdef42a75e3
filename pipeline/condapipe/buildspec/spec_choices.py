"""The choices a resolved spec made beyond CUDA, version and Python, said as "chose …" lines.

A user reading the build's first lines should see every default that decides what gets built:
the GPU arch list (does it hold 8.9 for a 40-series card?), the cuDNN, a Jetson board's JetPack
and the torchvision release `--with torchvision` pairs. These are read off the finished
BuildSpec, so the line is exactly what the build uses; what the user gave is never a "choice".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.defaults import Choice
from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.arch import ArchList, known_capabilities
from condapipe.facts.families import family_rules


def _given(settings: Mapping[str, Any], key: str) -> bool:
    return settings.get(key) not in (None, "", (), [])


def spec_choices(
    spec: BuildSpec, settings: Mapping[str, Any], companions: Collection[str] = ()
) -> tuple[Choice, ...]:
    """The Jetson, arch, cuDNN and companion-pair choices of `spec` that `settings` (config file
    and flags, before defaults) left open."""
    rules = family_rules(spec.package)
    out: list[Choice] = []
    if spec.jetson:
        out.append(_jetpack_choice(spec))
    gpu = [v for v in spec.cuda_variants if not v.is_cpu and v.archs is not None]
    if not _given(settings, "arch"):
        for variant in gpu:
            assert variant.archs is not None
            if spec.jetson:
                why = f"the Jetson {spec.jetson} board's GPU"
            else:
                kind = "magma" if rules.arch_default == "magma" else "pytorch"
                why = f"{kind}'s default list for CUDA {variant.cuda}"
            if len(gpu) > 1:
                why += f" (CUDA {variant.cuda} variant)"
            why += covered_by_same_major(variant.archs)
            out.append(Choice("arch", variant.archs.torch_arch_list(), why, pins=False))
    if rules.cudnn and not _given(settings, "cudnn") and not spec.jetson:
        for variant in gpu:
            if variant.cudnn:
                why = f"the CUDA table's cuDNN for CUDA {variant.cuda}"
                out.append(Choice("cudnn", variant.cudnn, why, pins=False))
    if "torchvision" in companions and spec.package == "pytorch":
        out.append(_pair_choice(spec.version))
    return tuple(out)


def covered_by_same_major(archs: ArchList) -> str:
    """ "; 8.7 8.9 run 8.6's code": GPUs not in the list that run a listed SASS of the same major and a
    lower minor (CUDA's binary compatibility), so a 40-series (8.9) user sees their card is served."""
    sass = sorted({(a.major, a.minor) for a in archs if not a.suffix})
    groups: dict[tuple[int, int], list[str]] = {}
    for major, minor in sorted(known_capabilities()):
        if (major, minor) in sass:
            continue
        lower = [s for s in sass if s[0] == major and s[1] < minor]
        if lower:
            groups.setdefault(lower[-1], []).append(f"{major}.{minor}")
    parts = [f"{' '.join(gpus)} run {a}.{b}'s code" for (a, b), gpus in sorted(groups.items())]
    return f"; {', '.join(parts)}" if parts else ""


def _jetpack_choice(spec: BuildSpec) -> Choice:
    """The board's JetPack the spec builds for, with what it brings (CUDA, cuDNN, Python, pytorch)."""
    from condapipe.facts import jetson

    board = str(spec.jetson)
    cuda = spec.cuda_variants[0].cuda
    releases: Sequence[jetson.JetPack] = jetson.jetpacks(board)
    pack = next((j for j in releases if j.cuda == cuda), releases[0])
    why = "the board's newest JetPack" if pack is releases[0] else f"the JetPack with CUDA {cuda}"
    facts = f"CUDA {pack.cuda}, cuDNN {pack.cudnn}, Python {pack.python}, pytorch {pack.pytorch}"
    others = [j.cuda for j in releases if j is not pack]
    change = f"--cuda {' or '.join(others)} picks another JetPack" if others else "the board's only JetPack"
    label = f"Jetson {board} JetPack"
    return Choice("jetpack", pack.version, f"{why} ({facts})", label=label, change=change, pins=False)


def _pair_choice(torch: str) -> Choice:
    try:
        pair = tables.torchvision_for_torch(torch)
    except UsageError:  # the plan refuses it with the paired releases listed
        return Choice("pair", "none", f"no torchvision release pairs with pytorch {torch}", pins=False)
    why = f"the release built against pytorch {torch} (torchvision.yaml)"
    return Choice(
        "pair", pair.version, why, label="torchvision", change="pytorch's --version changes it", pins=False
    )


__all__ = ["spec_choices"]

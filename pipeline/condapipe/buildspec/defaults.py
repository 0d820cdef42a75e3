"""Defaults from the data tables and the machine: what `condapipe build pytorch --cuda 11.0` means.

A newcomer types the short form; the tool fills in what it can decide and says why, one line
per choice, instead of asking for one missing flag per run:

- CUDA (families that need one): the CUDA of the nvcc on PATH, else of the single
  /usr/local/cuda-X.Y toolkit; nothing found (or several toolkits) is a UsageError listing the
  choices and the command to run next.
- PyTorch version (pytorch, libtorch): the newest release upstream built for that CUDA (and the
  given Pythons); when no release was, the newest built for the nearest CUDA of the same major.
- Python (pytorch): the running interpreter's when the release supports it, else the newest
  it supports.
- With `--with torchvision` (pytorch) or for torchvision itself, the version is chosen among the
  PyTorch releases a torchvision release pairs with (torchvision.yaml), so the default set builds.

Explicit flags and the config file always win: a key already in the settings is never touched.
The machine is read by the caller (the doctor stage's toolkit probe) and passed in as
`FoundToolkit`s, so this module stays a pure function of its arguments.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from condapipe.buildspec import pairs
from condapipe.buildspec.build_spec import normalize_python
from condapipe.errors import UsageError
from condapipe.facts import tables
from condapipe.facts.families import family_rules

CPU = tables.CPU


@dataclass(frozen=True)
class FoundToolkit:
    """A CUDA toolkit on this machine: the version its nvcc reports and where it was found."""

    cuda: str  # "13.0"
    where: str  # "/usr/local/bin/nvcc" or "/usr/local/cuda-12.4"
    on_path: bool  # the nvcc found on PATH (wins over the /usr/local/cuda-X.Y folders)


@dataclass(frozen=True)
class Choice:
    """One default the tool filled in, with the reason it prints."""

    key: str  # "cuda" | "version" | "python" | "arch" | "cudnn" | "jetpack" | "pair"
    value: str
    reason: str
    label: str | None = None  # what is chosen, when not the key ("torchvision", "JetPack for orin")
    change: str | None = None  # how to choose otherwise, when not "--<key> to change"
    pins: bool = True  # a spec flag that repeats the choice (`--<key> value`) for other commands

    def line(self, package: str) -> str:
        """ "chose pytorch 2.15.0: newest release built upstream for CUDA 13.0 (--version to change)"."""
        label = self.label or (package if self.key == "version" else self.key)
        change = self.change or f"--{self.key} to change"
        return f"chose {label} {self.value}: {self.reason} ({change})"

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "reason": self.reason}


def running_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def fill_defaults(
    package: str,
    settings: dict[str, Any],
    *,
    toolkits: Callable[[], Sequence[FoundToolkit]],
    python: str | None = None,
    command: str | None = None,
    companions: Sequence[str] = (),
) -> tuple[dict[str, Any], tuple[Choice, ...]]:
    """``settings`` with the missing CUDA / version / Python filled in, and the choices made.

    ``toolkits``: what the machine has (doctor's probe, asked only when the CUDA is missing);
    ``python``: the interpreter to prefer (default: this one); ``command``: what the user typed up
    to the flags ("condapipe build magma"), for the next-step hint when the CUDA cannot be inferred;
    ``companions``: the --with families, whose pairing limits the version chosen.
    """
    rules = family_rules(package)
    if settings.get("jetson"):
        return settings, ()  # the board's JetPack decides CUDA, version and Python
    out = dict(settings)
    choices: list[Choice] = []
    if rules.cuda == "required" and not out.get("cuda"):
        cuda, reason = _infer_cuda(
            package, toolkits(), command or f"condapipe build {package}", rules.cpu_allowed
        )
        out["cuda"] = [cuda]
        choices.append(Choice("cuda", cuda, reason))
    if rules.version.built_against_torch:
        if not out.get("version"):
            choices.append(_choose_torchvision(out))
        return _torchvision_python(out, choices, python)
    if not rules.version.torch_release:
        return out, tuple(choices)
    cudas = list(out.get("cuda") or ())  # resolved by the settings cascade (build_spec.cuda_axis)
    given_pythons = _pythons(out.get("python")) if rules.python != "none" else []
    if not out.get("version"):
        paired = _paired_torches() if "torchvision" in companions else None
        version, reason = _choose_pytorch(cudas, given_pythons, paired)
        if paired is not None:
            reason += f" that a torchvision release pairs with (torchvision.yaml pairs up to {paired[-1]})"
        out["version"] = version
        choices.append(Choice("version", version, reason))
    if rules.python == "required" and not given_pythons:
        info = tables.pytorch_info(str(out["version"]))
        py, reason = _choose_python(info, str(out["version"]), python or running_python())
        out["python"] = [py]
        choices.append(Choice("python", py, reason))
    return out, tuple(choices)


def _paired_torches() -> tuple[str, ...]:
    """The PyTorch releases some torchvision release is built against, oldest first."""
    paired = {tables.torchvision_info(v).torch for v in tables.torchvision_versions()}
    return tuple(v for v in tables.pytorch_versions() if v in paired)


def _choose_torchvision(out: dict[str, Any]) -> Choice:
    """A torchvision build without --version: the release paired with the PyTorch release
    `build pytorch` would choose for these CUDAs and Pythons among the paired ones (sets `out`)."""
    paired = _paired_torches()
    torch, reason = _choose_pytorch(list(out.get("cuda") or ()), _pythons(out.get("python")), paired)
    version = tables.torchvision_for_torch(torch).version
    out["version"] = version
    return Choice(
        "version",
        version,
        f"the release paired with pytorch {torch}, the {reason} among those a torchvision release pairs with",
    )


def _torchvision_python(
    out: dict[str, Any], choices: list[Choice], python: str | None
) -> tuple[dict[str, Any], tuple[Choice, ...]]:
    """A torchvision build without --python takes a Python of the PyTorch release it pairs with
    (its version stays required: it names the pair)."""
    if _pythons(out.get("python")) or not out.get("version"):
        return out, tuple(choices)
    try:
        torch = tables.torchvision_info(str(out["version"])).torch
    except UsageError:
        return out, tuple(choices)  # build_spec names the valid versions
    py, reason = _choose_python(tables.pytorch_info(torch), torch, python or running_python())
    out["python"] = [py]
    choices.append(Choice("python", py, reason))
    return out, tuple(choices)


# ------------------------------------------------------------------ CUDA from the machine


def newest_upstream_cuda() -> str:
    """The newest CUDA some known PyTorch release was built for upstream (the suggested --cuda)."""
    built = {c for v in tables.pytorch_versions() for c in tables.pytorch_info(v).cudas}
    return max(built, key=Version)


def _infer_cuda(
    package: str, toolkits: Sequence[FoundToolkit], command: str, cpu_allowed: bool
) -> tuple[str, str]:
    valid = f"valid: {'cpu ' if cpu_allowed else ''}{' '.join(tables.cuda_versions())}"
    on_path = [t for t in toolkits if t.on_path]
    if on_path:
        found, reason = on_path[0], f"the CUDA of the nvcc on PATH ({on_path[0].where})"
    else:
        dirs = sorted({t.where: t for t in toolkits}.values(), key=lambda t: Version(t.cuda))
        if not dirs:
            raise UsageError(
                f"{package} needs a CUDA version and this machine has none to take it from (no nvcc on "
                f"PATH, no /usr/local/cuda-X.Y); {valid}; run: {command} --cuda {newest_upstream_cuda()}"
            )
        if len(dirs) > 1:
            where = ", ".join(f"{t.where} ({t.cuda})" for t in dirs)
            raise UsageError(
                f"{package} needs a CUDA version: no nvcc on PATH and several toolkits ({where}); "
                f"pick one, e.g. run: {command} --cuda {dirs[-1].cuda}"
            )
        found, reason = dirs[0], f"the only CUDA toolkit found ({dirs[0].where}; no nvcc on PATH)"
    try:
        cuda = tables.normalize_cuda(found.cuda)
    except UsageError:
        raise UsageError(
            f"{package} needs a CUDA version: {found.where} is CUDA {found.cuda}, which condapipe's CUDA "
            f"table does not know; {valid}; run: {command} --cuda {newest_upstream_cuda()}"
        ) from None
    return cuda, reason


def cudas_accepting_gcc(major: int) -> tuple[str, ...]:
    """The CUDAs whose nvcc accepts gcc `major` (the table's max_gcc), oldest first: the --cuda a
    machine whose gcc is too new for the requested CUDA can build with instead."""
    return tuple(c for c in tables.cuda_versions() if tables.cuda_info(c).max_gcc >= major)


# ------------------------------------------------------------------ PyTorch version and Python


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else [str(v) for v in value]
    return [v for item in items for v in item.replace(",", " ").split() if v]


def _pythons(value: Any) -> list[str]:
    out: list[str] = []
    for item in _as_list(value):
        try:
            out.append(normalize_python(item))
        except UsageError:
            continue
    return out


def _distance(cuda: str, built: Sequence[str]) -> tuple[tuple[int, int], str]:
    """How far ``cuda`` is from the nearest CUDA of ``built``: (other major?, steps in the table)."""
    order = tables.cuda_versions()
    best: tuple[tuple[int, int], str] | None = None
    for other in built:
        if other not in order:
            continue
        key = (int(other.split(".")[0] != cuda.split(".")[0]), abs(order.index(other) - order.index(cuda)))
        # ties go to the newer CUDA: the nearer driver/toolchain generation
        if best is None or key < best[0] or (key == best[0] and Version(other) > Version(best[1])):
            best = (key, other)
    return best if best is not None else ((2, len(order)), "")


def _choose_pytorch(
    cudas: Sequence[str], pythons: Sequence[str], candidates: Sequence[str] | None = None
) -> tuple[str, str]:
    """The release for these CUDAs and Pythons among `candidates` (default: every known release)."""
    names = tables.pytorch_versions() if candidates is None else candidates
    releases = [(v, tables.pytorch_info(v)) for v in names]  # oldest first
    fitting = [(v, i) for v, i in releases if all(p in i.pythons for p in pythons)] or releases
    py_text = f" and Python {' '.join(pythons)}" if pythons and fitting is not releases else ""
    gpu = [c for c in cudas if c != CPU]
    if not gpu:
        return fitting[-1][0], f"newest release{' for Python ' + ' '.join(pythons) if py_text else ''}"

    def score(info: tables.PytorchInfo) -> tuple[int, int]:
        return max(_distance(c, info.cudas)[0] for c in gpu)

    best = min(score(i) for _, i in fitting)
    version, info = [(v, i) for v, i in fitting if score(i) == best][-1]
    wanted = " ".join(gpu)
    if best == (0, 0):
        return version, f"newest release built upstream for CUDA {wanted}{py_text}"
    older = {c: tables.upstream_releases_before_tables(c) for c in gpu}
    if all(older.values()):  # upstream built it, in releases older than the tables
        built = sorted({v for vs in older.values() for v in vs}, key=Version)
        oldest = fitting[0][0]
        return oldest, (
            f"upstream built pytorch for CUDA {wanted} only in {' and '.join(built)}, older than "
            f"condapipe's tables (they start at {releases[0][0]}); the oldest release in them"
            + (f" for Python {' '.join(pythons)}" if py_text else "")
        )
    # no upstream build: the newest release pytorch.yaml shows compiling with these CUDAs
    vouched = [v for v, _ in fitting if all(pairs.offered(v, c) for c in gpu)]
    if vouched:
        why = "; ".join(pairs.pair_verdict(vouched[-1], c).why for c in gpu)
        return vouched[-1], (
            f"no release was built upstream for CUDA {wanted}{py_text}; newest that compiles with it: {why}"
        )
    nearest = " ".join(_distance(c, info.cudas)[1] for c in gpu)
    return version, (
        f"no release was built upstream for CUDA {wanted}{py_text}; "
        f"newest built for the nearest CUDA, {nearest}"
    )


def _choose_python(info: tables.PytorchInfo, version: str, preferred: str) -> tuple[str, str]:
    if preferred in info.pythons:
        return preferred, f"this interpreter's Python, which pytorch {version} supports"
    newest = max(info.pythons, key=Version)
    return newest, (
        f"newest Python pytorch {version} supports (this interpreter's {preferred} is not one of "
        f"{' '.join(info.pythons)})"
    )


__all__ = [
    "Choice",
    "FoundToolkit",
    "cudas_accepting_gcc",
    "fill_defaults",
    "newest_upstream_cuda",
    "running_python",
]

"""Jetson profiles: `--jetson BOARD` turns into the spec settings a Jetson build needs.

People build PyTorch for Jetson boards by hand from a page of instructions (JetPack's CUDA and
cuDNN, the board's arch, OpenBLAS, no NCCL, no magma). A profile is those instructions as data
(pipeline/data/jetson.yaml): it fills in the platform, BLAS, CUDA, cuDNN, arch, Python and
PyTorch version that the user did not give, and says where JetPack put the toolkit and cuDNN.
The user's flags still win where they make sense; where they contradict the board (x86_64, MKL,
a CUDA no JetPack of the board ships, a CPU build) that is a one-line UsageError.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ruamel.yaml import YAML

from condapipe.errors import UsageError
from condapipe.facts import families as family_registry


@dataclass(frozen=True)
class JetPack:
    """One JetPack release: the CUDA, cuDNN and Python it installs on the board."""

    version: str
    cuda: str
    cudnn: str
    python: str
    pytorch: str  # the release NVIDIA published for this JetPack
    l4t: str


@dataclass(frozen=True)
class JetsonProfile:
    """A board running one JetPack, and where that JetPack put CUDA and cuDNN."""

    board: str
    arch: str  # pytorch spelling, e.g. "8.7"
    jetpack: JetPack
    platform: str
    blas: str
    cuda_home: str
    cudnn_include_dir: str
    cudnn_lib_dir: str
    env: tuple[tuple[str, str], ...]
    system_libraries: tuple[str, ...]  # globs of JetPack libraries packages link but do not ship

    def build_env(self) -> dict[str, str]:
        """Environment for build.sh: JetPack's toolkit and cuDNN locations plus the profile's env."""
        return {
            "CUDA_HOME": self.cuda_home,
            "CUDNN_INCLUDE_DIR": self.cudnn_include_dir,
            "CUDNN_LIB_DIR": self.cudnn_lib_dir,
            "CUDNN_LIBRARY": f"{self.cudnn_lib_dir}/libcudnn.so",
            **dict(self.env),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board,
            "arch": self.arch,
            "jetpack": self.jetpack.version,
            "l4t": self.jetpack.l4t,
            "cuda": self.jetpack.cuda,
            "cudnn": self.jetpack.cudnn,
            "cuda_home": self.cuda_home,
            "cudnn_include_dir": self.cudnn_include_dir,
            "cudnn_lib_dir": self.cudnn_lib_dir,
        }


@cache
def _table() -> dict[str, Any]:
    text = resources.files("condapipe.data").joinpath("jetson.yaml").read_text(encoding="utf-8")
    return YAML(typ="safe").load(text)


def boards() -> tuple[str, ...]:
    """The `--jetson` values, in table order."""
    return tuple(_table()["boards"])


def jetpacks(board: str) -> tuple[JetPack, ...]:
    """The JetPacks `board` runs, newest (the default) first."""
    table = _table()
    row = table["boards"].get(board)
    if row is None:
        raise UsageError(f"unknown Jetson board {board!r}; valid: {' '.join(boards())}")
    return tuple(
        JetPack(version=str(v), **{k: str(x) for k, x in table["jetpacks"][str(v)].items()})
        for v in row["jetpacks"]
    )


def profile(board: str, cuda: str | None = None) -> JetsonProfile:
    """`board` with the JetPack whose CUDA is `cuda` (None: the board's newest JetPack)."""
    table = _table()
    releases = jetpacks(board)
    if cuda is None:
        chosen = releases[0]
    else:
        matching = [j for j in releases if j.cuda == cuda]
        if not matching:
            offered = " ".join(f"{j.cuda} (JetPack {j.version})" for j in releases)
            raise UsageError(f"Jetson {board} has no JetPack with CUDA {cuda}; valid --cuda: {offered}")
        chosen = matching[0]
    return JetsonProfile(
        board=board,
        arch=str(table["boards"][board]["arch"]),
        jetpack=chosen,
        platform=str(table["platform"]),
        blas=str(table["blas"]),
        cuda_home=str(table["cuda_home"]),
        cudnn_include_dir=str(table["cudnn_include_dir"]),
        cudnn_lib_dir=str(table["cudnn_lib_dir"]),
        env=tuple((str(k), str(v)) for k, v in table["env"].items()),
        system_libraries=tuple(str(p) for p in table["system_libraries"]),
    )


def families(board: str | None = None) -> tuple[str, ...]:
    """The families whose profile takes `board` (`jetson_boards:`), or any board when None."""
    return tuple(
        p.name
        for p in family_registry.profiles()
        if (p.takes_board(board) if board is not None else bool(p.jetson_boards))
    )


def apply_profile(
    package: str, settings: dict[str, Any], *, pytorch_versioned: bool
) -> tuple[dict[str, Any], JetsonProfile]:
    """Settings with the profile's defaults filled in, and the profile; UsageError on a conflict.

    ``pytorch_versioned`` says whether the family's version is a PyTorch release (then the
    JetPack's PyTorch is the default --version).
    """
    board = str(settings["jetson"]).strip().lower()
    if package not in families():
        raise UsageError(f"--jetson does not apply to {package}; it applies to {' '.join(families())}")
    if board not in boards():
        raise UsageError(f"unknown Jetson board {settings['jetson']!r}; valid: {' '.join(boards())}")
    if package not in families(board):
        takes = [b for b in boards() if family_registry.profile(package).takes_board(b)]
        raise UsageError(f"{package} does not build for the {board} board; its boards: {' '.join(takes)}")
    raw = settings.get("cuda")  # resolved by the settings cascade: X.Y (or cpu), each once
    cudas = [raw] if isinstance(raw, str) else [str(c) for c in raw or []]
    if len(cudas) > 1:
        raise UsageError(f"a Jetson board runs one JetPack: give one --cuda, not {' '.join(cudas)}")
    cuda = cudas[0] if cudas else None
    if cuda == "cpu":
        raise UsageError("--jetson builds use the board's GPU: drop --cuda cpu (or drop --jetson)")
    prof = profile(board, cuda)
    platform = settings.get("platform")
    if platform and platform != prof.platform:
        raise UsageError(f"Jetson boards are {prof.platform}, not {platform}")
    blas = settings.get("blas")
    if blas and blas != prof.blas:
        raise UsageError(f"Jetson builds use {prof.blas} (no {blas} for Tegra)")
    out = dict(settings)
    out["jetson"] = board
    out["platform"] = prof.platform
    out["cuda"] = [prof.jetpack.cuda]
    out.setdefault("arch", None)
    if out["arch"] is None:
        out["arch"] = prof.arch
    if out.get("cudnn") is None:
        out["cudnn"] = prof.jetpack.cudnn
    if pytorch_versioned and not out.get("version"):
        out["version"] = prof.jetpack.pytorch
    if not out.get("python"):
        out["python"] = [prof.jetpack.python]
    out["env"] = {**prof.build_env(), **(settings.get("env") or {})}
    return out, prof

"""One resolved CUDA variant: every CUDA fact a build needs, decided once.

The CUDA table (cuda.yaml through condapipe.facts.tables) is read here and nowhere downstream:
render, plan, doctor and verify read the frozen `CudaVariant` (arch list of the family or the
user's, nvcc flags, magma package, run constraint, max gcc, cuDNN, BUILD_SPLIT_CUDA and static
cuDNN, the link-overflow warning), so two stages cannot decide the same fact differently.

What a package promises (the record in info/about.json and the default arch lists) is the facts
library's (condapipe.facts.promise): verify reads it without loading the settings cascade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from condapipe.facts import tables
from condapipe.facts.arch import ArchList, parse_arch_list
from condapipe.facts.families import FamilyRules
from condapipe.facts.promise import default_archs

CPU = "cpu"


@dataclass(frozen=True)
class CudaVariant:
    """One CUDA axis value of the variant matrix with every CUDA fact its build needs."""

    cuda: str  # "11.0", "12.8", ... or "cpu"
    archs: ArchList | None  # None for cpu
    cudnn: str | None  # e.g. "8.0.5"; None for cpu and for families without cuDNN
    build_split_cuda: bool = False  # BUILD_SPLIT_CUDA=ON (series has it; CUDA or arch count needs it)
    static_cudnn: bool = False  # USE_STATIC_CUDNN=1 (series wants it and a static cuDNN exists)
    nvcc_flags: tuple[str, ...] = ()  # TORCH_NVCC_FLAGS / magma's fatbin flags
    magma: tables.MagmaInfo | None = None  # pytorch's magma package for this CUDA (name, version, ...)
    run_constraint: str | None = None  # e.g. "cuda-version >=12.8,<12.9"
    max_gcc: int | None = None  # newest gcc this CUDA's nvcc accepts
    link_overflow_warning: str | None = None  # the 2 GB link risk, when the split cannot avoid it
    # cuBLAS & co., cuDNN and NCCL are host packages (conda-forge's names), not the machine's
    host_libraries: bool = False
    # Where this machine's toolkit for this CUDA is, when doctor found one to switch to
    # (/usr/local/cuda-X.Y): a machine fact, so not part of to_dict (no recipe or step input).
    toolkit_root: str | None = field(default=None, compare=False)

    @property
    def is_cpu(self) -> bool:
        return self.cuda == CPU

    def to_dict(self) -> dict[str, Any]:
        magma = self.magma
        return {
            "cuda": self.cuda,
            "archs": self.archs.to_dict() if self.archs is not None else None,
            "cudnn": self.cudnn,
            "build_split_cuda": self.build_split_cuda,
            "static_cudnn": self.static_cudnn,
            "nvcc_flags": list(self.nvcc_flags),
            "magma": {
                "package": magma.package,
                "version": magma.version,
                "build_number": magma.build_number,
                "url": magma.url,
                "sha256": magma.sha256,
            }
            if magma is not None
            else None,
            "run_constraint": self.run_constraint,
            "max_gcc": self.max_gcc,
            "host_libraries": self.host_libraries,
            "link_overflow_warning": self.link_overflow_warning,
        }


def link_overflow_warning(archs: ArchList, cuda: str, *, split_available: bool) -> str | None:
    """The warning for an arch list long enough to risk the 2 GB link overflow, or None.

    With BUILD_SPLIT_CUDA available the spec turns the split on instead, so there is no risk.
    """
    limit = tables.link_overflow_max_images()
    if archs.images <= limit or split_available:
        return None
    return (
        f"CUDA {cuda}: {archs.images} code images (archs + PTX) exceed {limit}; libtorch_cuda.so "
        "may pass 2 GB and fail to link ('relocation truncated to fit'), and BUILD_SPLIT_CUDA is "
        "not available in this version: shorten --arch"
    )


def resolve_variant(
    cuda: str,
    *,
    package: str,
    rules: FamilyRules,
    series: tables.PytorchInfo | None,
    arch_text: str | None,
    cudnn: str | None,
    system_cudnn: bool = False,
) -> tuple[CudaVariant, list[str]]:
    """Decide every CUDA fact of one variant, and the warnings the user should see about it.

    ``series`` is the PyTorch series row (pytorch-versioned families), ``system_cudnn`` says the
    build links the machine's dynamic cuDNN (a Jetson board's JetPack) instead of a static one.
    """
    if cuda == CPU:
        return CudaVariant(cuda=CPU, archs=None, cudnn=None), []
    warnings: list[str] = []
    info = tables.cuda_info(cuda)
    if arch_text is not None:
        archs = parse_arch_list(str(arch_text), cuda=cuda)
    else:
        archs = default_archs(rules, cuda, package)
    if not rules.ptx and archs.ptx():
        warnings.append(f"{package} ships SASS only: dropped PTX for {' '.join(sorted(archs.ptx()))}")
        archs = archs.sass_only()
    split_available = series is not None and series.build_split_cuda
    too_long = archs.images > tables.link_overflow_max_images()
    overflow = None
    if rules.link_overflow_check:
        overflow = link_overflow_warning(archs, cuda, split_available=split_available)
        if overflow:
            warnings.append(overflow)
    static_cudnn = bool(series is not None and series.static_cudnn and info.cudnn_static_available)
    variant = CudaVariant(
        cuda=info.version,
        archs=archs,
        cudnn=(cudnn or info.cudnn) if rules.cudnn else None,
        build_split_cuda=split_available and (info.build_split_cuda or too_long),
        static_cudnn=static_cudnn and rules.cudnn and not system_cudnn,
        nvcc_flags=info.nvcc_flags,
        magma=info.magma,
        run_constraint=str(info.run_constraint),
        max_gcc=info.max_gcc,
        link_overflow_warning=overflow,
        host_libraries=info.host_libraries and not system_cudnn,  # a Jetson board's come from JetPack
    )
    return variant, warnings

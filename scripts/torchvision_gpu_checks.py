#!/usr/bin/env python3
"""torchvision's CUDA operators and nvJPEG on the GPU against its own CPU results (issue 40, item 2).

Run by the fresh environment's python (a user's install from the channel): nms, roi_align and
deform_conv2d on random inputs of realistic size, each on cuda and on the CPU, compared; then
torchvision.io.decode_jpeg(device="cuda") (nvJPEG) against libjpeg's decode of the same bytes, one
image and a batch. One line per check with the largest difference; exit 0 when every check
matched, 1 when one differed or raised, 2 when there is no GPU to compare on (the CPU half ran).

usage: torchvision_gpu_checks.py TORCHVISION_VERSION TORCH_VERSION
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

import torch
import torchvision
from torchvision import io, ops


def _boxes(n: int, gen: torch.Generator) -> torch.Tensor:
    xy = torch.rand(n, 2, generator=gen) * 400
    wh = torch.rand(n, 2, generator=gen) * 120 + 4
    return torch.cat([xy, xy + wh], dim=1)


def nms(device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    boxes, scores = _boxes(2000, gen), torch.rand(2000, generator=gen)
    return ops.nms(boxes.to(device), scores.to(device), iou_threshold=0.5).cpu()


def roi_align(device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    features = torch.randn(2, 16, 64, 64, generator=gen)
    boxes = _boxes(128, gen) / 8
    rois = torch.cat([torch.randint(0, 2, (128, 1), generator=gen).float(), boxes], dim=1)
    out = [
        ops.roi_align(features.to(device), rois.to(device), (7, 7), 1.0, 2, aligned=aligned).cpu()
        for aligned in (False, True)
    ]
    return torch.stack(out)


def deform_conv2d(device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 8, 20, 20, generator=gen)
    weight = torch.randn(16, 8, 3, 3, generator=gen)
    offset = torch.randn(2, 2 * 9, 18, 18, generator=gen)
    mask = torch.rand(2, 9, 18, 18, generator=gen)
    bias = torch.randn(16, generator=gen)
    args = [t.to(device) for t in (x, offset, weight, bias, mask)]
    return ops.deform_conv2d(args[0], args[1], args[2], args[3], mask=args[4]).cpu()


def _image(seed: int) -> torch.Tensor:
    """A smooth 3x96x128 image plus mild noise: what JPEG keeps within a level or two."""
    gen = torch.Generator().manual_seed(seed)
    y, x = torch.arange(96).view(1, 96, 1), torch.arange(128).view(1, 1, 128)
    base = 2 * y + x + 50 * torch.arange(3).view(3, 1, 1) + torch.randint(0, 4, (3, 96, 128), generator=gen)
    return base.clamp(0, 255).to(torch.uint8)


def compare(name: str, run: Callable[[str], torch.Tensor], cuda: bool, atol: float) -> bool:
    try:
        on_cpu = run("cpu")
        if not cuda:
            print(f"{name}: cpu {tuple(on_cpu.shape)} (no GPU: not compared)")
            return True
        on_gpu = run("cuda")
        if on_cpu.dtype == torch.int64:  # nms: the kept indices, in order
            same = torch.equal(on_cpu, on_gpu)
            print(
                f"{name}: cuda keeps {on_gpu.numel()} boxes, cpu {on_cpu.numel()}: "
                f"{'same' if same else 'DIFFER'}"
            )
            return same
        diff = (on_gpu - on_cpu).abs().max().item()
        ok = diff <= atol
        print(
            f"{name}: cuda vs cpu {tuple(on_cpu.shape)} max |diff| {diff:.3g} "
            f"(<= {atol}: {'ok' if ok else 'DIFFER'})"
        )
        return ok
    except Exception:  # the check's verdict, with the operator's own error
        print(f"{name}: FAILED")
        traceback.print_exc(file=sys.stdout)
        return False


def check_nvjpeg() -> bool:
    """One image and a batch of three, decoded by nvJPEG on the GPU and by libjpeg on the CPU."""
    try:
        datas = [io.encode_jpeg(_image(seed), quality=92) for seed in range(3)]
        one_gpu = io.decode_jpeg(datas[0], device="cuda")
        batch_gpu = io.decode_jpeg(datas, device="cuda")
        diffs = [
            (gpu.cpu().int() - io.decode_jpeg(data).int()).abs().float().mean().item()
            for gpu, data in zip([one_gpu, *batch_gpu], [datas[0], *datas], strict=True)
        ]
        ok = one_gpu.device.type == "cuda" and max(diffs) < 2
        print(f"decode_jpeg(device='cuda'): {1 + len(batch_gpu)} images, mean |diff| vs libjpeg at most "
              f"{max(diffs):.3f} levels (< 2: {'ok' if ok else 'DIFFER'})")  # fmt: skip
        return ok
    except Exception:
        print("decode_jpeg(device='cuda'): FAILED")
        traceback.print_exc(file=sys.stdout)
        return False


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    vision, torch_version = sys.argv[1:3]
    built = torchvision.extension._check_cuda_version()
    print(f"torchvision {torchvision.__version__} ({torchvision.__file__}), torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}, compiled with CUDA {built}")  # fmt: skip
    pair = (
        torchvision.__version__.split("+")[0] == vision and torch.__version__.split("+")[0] == torch_version
    )
    if not pair:
        print(f"FAIL: not the pair {vision} / {torch_version}")
        return 1
    cuda = torch.cuda.is_available()
    if cuda:
        print(f"device {torch.cuda.get_device_name(0)} {torch.cuda.get_device_capability(0)}, "
              f"torch archs {torch.cuda.get_arch_list()}")  # fmt: skip
    results = [
        compare("nms", nms, cuda, 0),
        compare("roi_align", roi_align, cuda, 1e-4),
        compare("deform_conv2d", deform_conv2d, cuda, 1e-3),
    ]
    if not cuda:
        print("no GPU: torch.cuda.is_available() is False; the CPU half ran, nothing was compared")
        return 2
    results.append(check_nvjpeg())
    print(f"{sum(results)} of {len(results)} GPU checks match the CPU")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The torchvision package's test, run in a fresh environment with its pytorch.

Usage: check_torchvision.py TORCHVISION_VERSION TORCH_VERSION CUDA(X.Y|cpu) WEBP(0|1)

The pair is the promised one; the compiled operators (torchvision::nms, roi_align) and the image
codecs (PNG, JPEG, and WebP where the release reads it) run; a CUDA build reports its CUDA, and on a
machine with a GPU its kernels (nms, roi_align, deform_conv2d) and nvJPEG run there and match the CPU.
"""

import sys

import torch
import torchvision
from torchvision import io, ops


def check_pair(vision: str, torch_version: str, cuda: str) -> None:
    assert torchvision.__version__.split("+")[0] == vision, torchvision.__version__
    assert torch.__version__.split("+")[0] == torch_version, torch.__version__
    # torchvision's own record of the CUDA it was compiled with (-1 without CUDA): 12080 is 12.8.
    built = torchvision.extension._check_cuda_version()
    if cuda == "cpu":
        assert built == -1, f"a cpu build reports CUDA {built}"
    else:
        major, minor = (int(x) for x in cuda.split("."))
        assert built // 1000 == major and (built % 1000) // 10 == minor, f"compiled with CUDA {built}"


def boxes_and_scores(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    boxes = torch.tensor(
        [[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 19, 31, 29]], dtype=torch.float32
    )
    scores = torch.tensor([0.9, 0.8, 0.7, 0.95])
    return boxes.to(device), scores.to(device)


def roi_align(device: str) -> torch.Tensor:
    image = torch.arange(2 * 3 * 16 * 16, dtype=torch.float32).reshape(2, 3, 16, 16) / 100
    rois = torch.tensor([[0, 0.0, 0.0, 7.5, 7.5], [1, 2.25, 3.5, 14.0, 12.0]])
    return ops.roi_align(
        image.to(device), rois.to(device), output_size=(4, 4), spatial_scale=1.0, sampling_ratio=2
    )


def deform_conv2d(device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    x, weight = torch.randn(1, 4, 9, 9, generator=gen), torch.randn(6, 4, 3, 3, generator=gen)
    offset, mask = torch.randn(1, 18, 7, 7, generator=gen), torch.rand(1, 9, 7, 7, generator=gen)
    return ops.deform_conv2d(x.to(device), offset.to(device), weight.to(device), mask=mask.to(device))


def check_ops() -> None:
    keep = ops.nms(*boxes_and_scores("cpu"), iou_threshold=0.5)
    assert keep.tolist() == [3, 0], keep
    out = roi_align("cpu")
    assert out.shape == (2, 3, 4, 4), out.shape
    # roi_align averages bilinear samples of a linear ramp (value (16 y + x) / 100), so a bin is the
    # ramp at its mean sample point: roi 0's first bin (1.875 wide, 2x2 samples) at y = x = 0.9375.
    assert abs(out[0, 0, 0, 0].item() - (0.9375 * 16 + 0.9375) / 100) < 1e-4, out[0, 0, 0, 0]


def test_image() -> torch.Tensor:
    """A smooth 3x32x24 image (per-channel ramps): JPEG keeps it within a level or two; noise it
    does not (a high-frequency pattern at quality 100 differs by ~60 levels in the real 0.21.0)."""
    y, x = torch.arange(32).view(1, 32, 1), torch.arange(24).view(1, 1, 24)
    return (4 * y + 3 * x + 40 * torch.arange(3).view(3, 1, 1)).clamp(0, 255).to(torch.uint8)


def check_codecs(webp: bool) -> None:
    image = test_image()
    assert torch.equal(io.decode_png(io.encode_png(image)), image), "PNG round trip"
    decoded = io.decode_jpeg(io.encode_jpeg(image, quality=100))
    assert decoded.shape == image.shape, decoded.shape
    assert (decoded.int() - image.int()).abs().float().mean() < 3, "JPEG round trip"
    if webp:
        # No WebP encoder in torchvision: garbage must reach libwebp (its error), not the
        # "not compiled with libwebp support" refusal of a build without it.
        try:
            io.decode_webp(torch.frombuffer(bytearray(b"RIFF\x00\x00\x00\x00WEBPVP8 "), dtype=torch.uint8))
        except RuntimeError as exc:
            assert "not compiled" not in str(exc), exc
        else:
            raise AssertionError("decode_webp accepted garbage")


def check_gpu() -> None:
    keep_cpu = ops.nms(*boxes_and_scores("cpu"), iou_threshold=0.5)
    keep_gpu = ops.nms(*boxes_and_scores("cuda"), iou_threshold=0.5)
    assert keep_gpu.cpu().tolist() == keep_cpu.tolist(), (keep_gpu, keep_cpu)
    torch.testing.assert_close(roi_align("cuda").cpu(), roi_align("cpu"), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(deform_conv2d("cuda").cpu(), deform_conv2d("cpu"), rtol=1e-4, atol=1e-4)
    jpeg = io.encode_jpeg(test_image(), quality=95)
    on_gpu = io.decode_jpeg(jpeg, device="cuda").cpu()  # nvJPEG
    on_cpu = io.decode_jpeg(jpeg)
    assert (on_gpu.int() - on_cpu.int()).abs().float().mean() < 2, "nvJPEG differs from libjpeg"
    print(
        f"torchvision: nms, roi_align, deform_conv2d and nvJPEG on {torch.cuda.get_device_name()} "
        "match the CPU"
    )


def main() -> None:
    vision, torch_version, cuda, webp = sys.argv[1:5]
    check_pair(vision, torch_version, cuda)
    check_ops()
    check_codecs(webp == "1")
    if cuda != "cpu" and torch.cuda.is_available():
        check_gpu()
    print(f"torchvision {torchvision.__version__} with torch {torch.__version__}: ok")


if __name__ == "__main__":
    main()

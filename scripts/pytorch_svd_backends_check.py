"""Which CUDA SVD path gives wrong singular values (issue 33: test_svd failed on 2.6.0 + CUDA 13.0).

PyTorch 2.6.0's test_linalg.py::test_svd compares `torch.linalg.svd(A, full_matrices=True)`'s
singular values with `full_matrices=False`'s over three backends (default, magma, cusolver) and, for
cusolver, four drivers; on the CUDA 13.0 package (second hold) float32, float64, complex64 and
complex128 each failed with all 4 of 4 values wrong (complex64 off by 1.7e28: an output never
written, not rounding), without saying which path. The third hold's per-path check (shapes (), (1,),
(2,), (2, 1) x m, n in 12, 4, 2 against the CPU, gesvda on tall inputs only) found 0 wrong paths.

So this now runs, and prints every mismatch it finds, not only the first:
  1. paths: each backend x driver x dtype x full_matrices on the test's shapes (batches (), (0,),
     (1,), (2,), (2, 1), (0, 2) x m, n in 12, 4, 2, 0; gesvda on every shape: PyTorch 2.6 transposes
     wide inputs for it) against the CPU's LAPACK values and against the other full_matrices setting
     on the same path; before each call the CUDA caching allocator's small blocks are filled with
     NaN, so an output the library leaves unwritten shows as NaN instead of an earlier right answer;
  2. replica: the test's own loop, in its order (backends, then batches x m x n x drivers, tensors
     made on the GPU by make_tensor as the test does), each comparison the test makes.
Run with the package's python on a GPU machine; exit 1 if anything is wrong. `--device cpu` runs
the same code on the CPU (a dry run of the script itself where no GPU is).
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch
from torch.testing import make_tensor

BATCHES = ((), (0,), (1,), (2,), (2, 1), (0, 2))
NS = (12, 4, 2, 0)
DRIVERS = (None, "gesvd", "gesvdj", "gesvda")
DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-3 if dtype in (torch.float32, torch.complex64) else 1e-9


def _poison_small_blocks(device: str) -> None:
    """Fill freed small allocator blocks (512 B .. 64 KiB) with NaN, so they are reused dirty."""
    if device != "cuda":
        return
    blocks = [
        torch.full((size // 4,), float("nan"), device=device)
        for size in (512, 1024, 2048, 4096, 8192, 16384, 65536)
        for _ in range(8)
    ]
    torch.cuda.synchronize()
    del blocks


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if not a.numel():
        return 0.0
    wide = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
    d = (a.cpu().to(wide) - b.cpu().to(wide)).abs()
    return float("inf") if bool(torch.isnan(d).any()) else float(d.max())


def check_paths(gen: torch.Generator, device: str) -> int:
    drivers = DRIVERS if device == "cuda" else (None,)  # driver= is for CUDA inputs only
    paths = [("default", None), ("magma", None)] + [("cusolver", d) for d in drivers]
    bad = 0
    for backend, driver in paths:
        torch.backends.cuda.preferred_linalg_library(backend)
        for dtype, full in itertools.product(DTYPES, (False, True)):
            worst, where = 0.0, "-"
            for batch, m, n in itertools.product(BATCHES, NS, NS):
                a = torch.randn((*batch, m, n), dtype=dtype, generator=gen)
                want = torch.linalg.svdvals(a)  # CPU LAPACK
                _poison_small_blocks(device)
                _, s, _ = torch.linalg.svd(a.to(device), full_matrices=full, driver=driver)
                _poison_small_blocks(device)
                _, s_other, _ = torch.linalg.svd(a.to(device), full_matrices=not full, driver=driver)
                diff = max(_diff(s, want), _diff(s, s_other))
                if diff > worst:
                    worst, where = diff, str((*batch, m, n))
            verdict = "ok" if worst <= _tolerance(dtype) else "WRONG"
            bad += verdict == "WRONG"
            print(
                f"path {backend:8} driver={driver!s:7} {dtype!s:16} full_matrices={full!s:5} "
                f"max |S - S_cpu|, |S - S_other| = {worst:.3g} at {where}: {verdict}",
                flush=True,
            )
    return bad


def check_replica(device: str) -> int:
    """test_svd's loop as 2.6.0 runs it (test/test_linalg.py), every failing comparison printed."""
    bad = 0
    for dtype in DTYPES:
        tol = _tolerance(dtype)
        for backend in ("default", "magma", "cusolver"):
            torch.backends.cuda.preferred_linalg_library(backend)
            drivers = DRIVERS if device == "cuda" else (None,)
            for batch, m, n, driver in itertools.product(BATCHES, NS, NS, drivers):
                if not (backend == "cusolver" or driver is None):
                    continue
                k = min(m, n)
                a = make_tensor((*batch, m, n), dtype=dtype, device=device)
                u, s, vh = torch.linalg.svd(a, full_matrices=False, driver=driver)
                u_f, s_f, vh_f = torch.linalg.svd(a, full_matrices=True, driver=driver)
                checks = {
                    "thin rebuild": _diff((u @ s.to(dtype).diag_embed()) @ vh, a),
                    "S_full vs S_thin": _diff(s_f, s),
                    "full rebuild": _diff((u_f[..., :k] @ s_f.to(dtype).diag_embed()) @ vh_f[..., :k, :], a),
                    "svdvals vs S_thin": _diff(torch.linalg.svdvals(a, driver=driver), s),
                    "S_thin vs cpu": _diff(s, torch.linalg.svdvals(a.cpu())),
                }
                scale = 1.0 + float(a.abs().max()) if a.numel() else 1.0
                for what, diff in checks.items():
                    if diff > tol * scale * max(m, n, 1):
                        bad += 1
                        print(
                            f"replica WRONG {backend:8} driver={driver!s:7} {dtype!s:16} "
                            f"shape={(*batch, m, n)} {what}: {diff:.3g}",
                            flush=True,
                        )
        print(f"replica {dtype}: done", flush=True)
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run")
    device = parser.parse_args().device
    gen = torch.Generator().manual_seed(0)
    bad_paths = check_paths(gen, device)
    bad_replica = check_replica(device)
    print(
        f"{bad_paths} wrong paths, {bad_replica} wrong replica comparisons; torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}, magma {torch.cuda.has_magma}"
    )
    return 1 if bad_paths or bad_replica else 0


if __name__ == "__main__":
    sys.exit(main())

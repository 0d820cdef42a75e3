"""Which CUDA SVD path gives wrong singular values (issue 33: test_svd failed on 2.6.0 + CUDA 13.0).

PyTorch 2.6.0's test_linalg.py::test_svd compares `torch.linalg.svd(A, full_matrices=True)`'s
singular values with `full_matrices=False`'s over three backends (default, magma, cusolver) and, for
cusolver, four drivers; on the CUDA 13.0 package every dtype failed, without saying which path. This
runs the test's shapes (batches (), (0,), (1,), (2,), (2, 1), (0, 2) x m, n in 12, 4, 2, 0) on every
path against the CPU (LAPACK) values, and, as the test does, the full and thin GPU results against
each other, and prints one line per path: the largest difference, so the wrong one is named.
gesvda runs on every shape: PyTorch 2.6 transposes wide inputs for it (the third hold's run skipped
m <= n and found no wrong path). Run with the package's python on a GPU machine.
"""

from __future__ import annotations

import itertools
import sys

import torch


def main() -> int:
    batches = ((), (0,), (1,), (2,), (2, 1), (0, 2))
    shapes = [(*b, m, n) for b in batches for m, n in itertools.product((12, 4, 2, 0), repeat=2)]
    paths = [("default", None), ("magma", None)] + [
        ("cusolver", d) for d in (None, "gesvd", "gesvdj", "gesvda")
    ]
    dtypes = (torch.float32, torch.float64, torch.complex64, torch.complex128)
    bad = 0
    gen = torch.Generator().manual_seed(0)
    for backend, driver in paths:
        torch.backends.cuda.preferred_linalg_library(backend)
        for dtype, full in itertools.product(dtypes, (False, True)):
            worst, where = 0.0, ""
            for shape in shapes:
                a = torch.randn(shape, dtype=dtype, generator=gen)
                want = torch.linalg.svdvals(a)  # CPU LAPACK
                _, s, _ = torch.linalg.svd(a.cuda(), full_matrices=full, driver=driver)
                # the test's own comparison: the other full_matrices setting on the same path
                _, s_other, _ = torch.linalg.svd(a.cuda(), full_matrices=not full, driver=driver)
                diff = 0.0
                if want.numel():
                    diff = max(float((s.cpu() - want).abs().max()), float((s - s_other).abs().max()))
                if diff > worst:
                    worst, where = diff, str(shape)
            tol = 1e-3 if dtype in (torch.float32, torch.complex64) else 1e-9
            verdict = "ok" if worst <= tol else "WRONG"
            bad += verdict == "WRONG"
            print(
                f"{backend:8} driver={driver!s:7} {dtype!s:16} full_matrices={full!s:5} "
                f"max|S-S_cpu|, |S-S_other|={worst:.3g} at {where or '-'}: {verdict}"
            )
    print(
        f"{bad} wrong paths; torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"magma {torch.cuda.has_magma}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

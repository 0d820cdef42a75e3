"""Read by conda-build's interpreter when condapipe runs `conda build` (its folder leads PYTHONPATH).

conda-build packs a `.conda` through conda-package-handling, which compresses on
`conda_fmt.ZSTD_COMPRESS_THREADS` threads (1) and conda-build has no option for it. condapipe has
the engine compress the package once, at the final level, on every core: this sets that number to
CONDAPIPE_ZSTD_THREADS. Any other interpreter (a build script's Python) lacks the module and is
left alone.
"""

import os

_threads = os.environ.get("CONDAPIPE_ZSTD_THREADS", "")
if _threads.isdigit() and int(_threads) > 0:
    try:
        import conda_package_handling.conda_fmt as _conda_fmt
    except ImportError:
        pass
    else:
        _conda_fmt.ZSTD_COMPRESS_THREADS = int(_threads)

"""Stand-in for PyTorch's setup.py (see README.md): `python setup.py install` builds with CMake."""

import glob
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
prefix = os.environ["PREFIX"]
if sys.argv[1:] != ["install"]:
    sys.exit(f"stand-in setup.py: only 'install' is supported, not {sys.argv[1:]}")
headers = sorted(glob.glob(os.path.join(prefix, "include", "python3.*")))
if len(headers) != 1:
    sys.exit(f"stand-in setup.py: expected one Python include dir in {prefix}/include, found {headers}")
build = os.path.join(here, "build")
configure = [
    "cmake",
    "-S",
    here,
    "-B",
    build,
    "-G",
    "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    f"-DCMAKE_INSTALL_PREFIX={prefix}",
    f"-DPYTHON_INCLUDE_DIR={headers[0]}",
    f"-DSITE_PACKAGES={prefix}/lib/{os.path.basename(headers[0])}/site-packages",
]
subprocess.run(configure, check=True)
subprocess.run(["cmake", "--build", build, "--parallel", os.environ.get("MAX_JOBS", "1")], check=True)
subprocess.run(["cmake", "--install", build], check=True)

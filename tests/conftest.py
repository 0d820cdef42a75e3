"""What every test session shares: where the test tools are, and how a missing system tool reads.

The test extras (`pip install -e '.[test]'`) bring shellcheck, cmake and ninja as PyPI wheels; pip
puts them next to the interpreter, which is on PATH only in an activated venv. Putting that folder
first makes `python3 -m pytest` (or venv/bin/python -m pytest) find the tools it installed.
What PyPI cannot provide (gcc, binutils, GNU patch, ccache, nvcc) is listed in the README; tests
that need one of them skip with `needs_system_tool` naming the package to install.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

_BIN = str(Path(sys.executable).parent)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join(filter(None, (_BIN, os.environ.get("PATH"))))

# tool -> how to get it on Debian/Ubuntu (the README's apt command installs all of these)
APT_TOOLS = {
    "gcc": "apt-get install gcc",
    "g++": "apt-get install g++",
    "readelf": "apt-get install binutils",
    "patch": "apt-get install patch",
    "ccache": "apt-get install ccache",
    "nvcc": "the CUDA toolkit (NVIDIA's apt repository: apt-get install cuda-toolkit-13-0)",
}


def needs_system_tool(*tools: str) -> pytest.MarkDecorator:
    """skipif any tool is missing, with the reason saying what to install."""
    missing = [t for t in tools if shutil.which(t) is None]
    reason = "; ".join(f"needs {t}: {APT_TOOLS.get(t, 'install it')}" for t in missing)
    return pytest.mark.skipif(bool(missing), reason=reason or "all present")


def skip_without(tool: str) -> None:
    """Inside a test or helper: skip (not fail) when a system tool PyPI cannot provide is missing."""
    if shutil.which(tool) is None:
        pytest.skip(f"needs {tool}: {APT_TOOLS.get(tool, 'install it')}")

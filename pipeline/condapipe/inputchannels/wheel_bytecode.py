"""The byte-compiled `.pyc` files a wheel's conda package ships, as conda packages do.

pip byte-compiles a wheel when it installs it; a conda package carries its `.pyc` files instead.
A package without them gets them written at first import, into the prefix of whoever imports it:
a recipe whose build imports a `condapipe wheels` package then finds `__pycache__` files it never
made inside its own package. Hash-checked pycs (PEP 552) stay valid whatever mtime the installer
gives the sources.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import PurePosixPath

from condapipe.package.conda_writer import PackageFile


def pyc_path(rel: str, cache_tag: str) -> str:
    """`lib/.../pkg/mod.py` -> `lib/.../pkg/__pycache__/mod.<cache_tag>.pyc`."""
    path = PurePosixPath(rel)
    return str(path.parent / "__pycache__" / f"{path.stem}.{cache_tag}.pyc")


def bytecode_files(files: dict[str, PackageFile], site_packages: str, short: str) -> list[PackageFile]:
    """A `.pyc` for every `.py` under `site_packages` that compiles, when the running CPython is
    the target one (`short`: X.Y); none otherwise (another interpreter's bytecode would be wrong)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" != short or sys.implementation.cache_tag is None:
        return []
    from importlib._bootstrap_external import _code_to_hash_pyc  # type: ignore[attr-defined]

    out = []
    for rel, entry in files.items():
        if (
            not rel.endswith(".py")
            or not rel.startswith(site_packages + "/")
            or entry.link_target is not None
        ):
            continue
        target = pyc_path(rel, sys.implementation.cache_tag)
        if target in files:
            continue
        try:
            code = compile(entry.data, rel, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue  # a file for another Python (pip skips it too)
        data = bytes(_code_to_hash_pyc(code, importlib.util.source_hash(entry.data), checked=True))
        out.append(PackageFile(target, data))
    return out

"""Helpers for the fix/verify/elf tests: compile real binaries, build real conda packages.

Binaries come from the real gcc and nvcc; input packages are written by
conda-package-handling (the reference writer) so that condapipe's reader and repacker are
checked against something they did not produce themselves.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

NVCC = shutil.which("nvcc") or "/usr/local/bin/nvcc"

LIB_SRC = "int greet_value(void) { return 42; }\n"
USER_SRC = "int greet_value(void);\nint user_value(void) { return greet_value() + 1; }\n"
MAIN_SRC = (
    '#include <stdio.h>\nint user_value(void);\nint main(void) { printf("%d\\n", user_value()); return 0; }\n'
)
KERNEL_SRC = """
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
extern "C" void launch_scale(float *x, float a) { scale<<<1, 32>>>(x, a); }
"""


def run(*args: str | Path, cwd: Path | None = None) -> str:
    if shutil.which(str(args[0])) is None and not Path(args[0]).exists():
        from conftest import skip_without  # gcc, readelf, nvcc: system tools (README), a skip not a failure

        skip_without(str(args[0]))
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{args[0]} failed: {proc.stderr}")
    return proc.stdout


def gcc_shared(
    out: Path,
    src: str,
    *,
    soname: str | None = None,
    rpath: str | None = None,
    runpath: bool = False,
    libs: tuple[str, ...] = (),
    libdirs: tuple[Path, ...] = (),
) -> Path:
    """Compile `src` into a shared library at `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    c = out.parent / f".{out.name}.c"
    c.write_text(src)
    args: list[str | Path] = ["gcc", "-shared", "-fPIC", "-O0", "-o", out, c]
    if soname:
        args.append(f"-Wl,-soname,{soname}")
    for d in libdirs:
        args.append(f"-L{d}")
    args.append("-Wl,--no-as-needed")
    args += [f"-l:{lib}" for lib in libs]
    if rpath is not None:
        args += [f"-Wl,-rpath,{rpath}", "-Wl,--enable-new-dtags" if runpath else "-Wl,--disable-new-dtags"]
    run(*args)
    c.unlink()
    return out


def gcc_exe(
    out: Path,
    src: str,
    *,
    libs: tuple[str, ...] = (),
    libdirs: tuple[Path, ...] = (),
    rpath: str | None = None,
) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    c = out.parent / f".{out.name}.c"
    c.write_text(src)
    args: list[str | Path] = ["gcc", "-O0", "-o", out, c, *[f"-L{d}" for d in libdirs], "-Wl,--no-as-needed"]
    args += [f"-l:{lib}" for lib in libs]
    if rpath is not None:
        args += [f"-Wl,-rpath,{rpath}", "-Wl,--disable-new-dtags"]
    run(*args)
    c.unlink()
    return out


def nvcc_shared(out: Path, gencodes: tuple[str, ...], extra: tuple[str, ...] = ()) -> Path:
    """Compile the test kernel into a shared library with the given `-gencode` values."""
    out.parent.mkdir(parents=True, exist_ok=True)
    cu = out.parent / f".{out.name}.cu"
    cu.write_text(KERNEL_SRC)
    args: list[str | Path] = [NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", out, cu, *extra]
    for g in gencodes:
        args += ["-gencode", g]
    run(*args)
    cu.unlink()
    return out


def readelf_dynamic(path: Path) -> list[str]:
    """`readelf -d` lines for NEEDED, SONAME, RPATH and RUNPATH: what the loader will use."""
    out = run("readelf", "-d", "-W", path)
    keep = ("(NEEDED)", "(SONAME)", "(RPATH)", "(RUNPATH)")
    return [" ".join(line.split()[1:]) for line in out.splitlines() if any(k in line for k in keep)]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_metadata(
    root: Path,
    name: str = "demo",
    version: str = "1.0",
    depends: tuple[str, ...] = (),
    placeholders: dict[str, str] | None = None,
    subdir: str = "linux-64",
) -> None:
    """info/index.json, info/files and info/paths.json for the files under `root`."""
    info = root / "info"
    info.mkdir(parents=True, exist_ok=True)
    index = {
        "name": name,
        "version": version,
        "build": "0",
        "build_number": 0,
        "depends": list(depends),
        "subdir": subdir,
        "platform": "linux",
        "arch": "x86_64",
    }
    (info / "index.json").write_text(json.dumps(index))
    placeholders = placeholders or {}
    paths = []
    files = []
    for dirpath, _dirs, filenames in os.walk(root):
        for fname in sorted(filenames):
            full = Path(dirpath) / fname
            rel = full.relative_to(root).as_posix()
            if rel.startswith("info/"):
                continue
            files.append(rel)
            entry: dict[str, object] = {"_path": rel}
            if full.is_symlink():
                entry["path_type"] = "softlink"
                entry["size_in_bytes"] = len(os.readlink(full))
            else:
                entry["path_type"] = "hardlink"
                entry["sha256"] = sha256(full)
                entry["size_in_bytes"] = full.stat().st_size
            if rel in placeholders:
                entry["prefix_placeholder"] = placeholders[rel]
                entry["file_mode"] = "text"
            paths.append(entry)
    (info / "files").write_text("\n".join(sorted(files)) + "\n")
    (info / "paths.json").write_text(
        json.dumps({"paths": sorted(paths, key=lambda e: e["_path"]), "paths_version": 1})
    )


def make_package(root: Path, out: Path) -> Path:
    """Pack `root` (with info/) into `out` using conda-package-handling, like conda-build does."""
    from conda_package_handling import api

    files = []
    for dirpath, _dirs, filenames in os.walk(root):
        for fname in filenames:
            files.append((Path(dirpath) / fname).relative_to(root).as_posix())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    api.create(str(root), sorted(files), out.name, out_folder=str(out.parent))
    return out

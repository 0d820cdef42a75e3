"""Compile one translation unit of a configured PyTorch tree against another source tree and CUDA.

Why: a CUDA-13 configure plus ATen's codegen takes most of an hour on a loaded 2-core machine,
while the per-TU failures of CCCL 3 / CUDA 13 live in the sources and headers, not in the
configure. This takes the object's own build.ninja statement (DEFINES, INCLUDES, FLAGS) from a
tree configured for another CUDA, points every source path at `--src` (the patched tree; the
generated headers stay in the configured build folder), swaps the CUDA include folder and nvcc,
narrows -gencode to `--arch`, and runs the compile with its exit status and last lines printed.

    python scripts/pytorch_tu_retarget.py --build /path/src/build --src /tmp/w33/src \
        --cuda-home /opt/cuda-13.0-full --arch 90 --out /tmp/w33/obj \
        aten/src/ATen/native/cuda/Nonzero.cu
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path


def ninja_statement(build_ninja: Path, source: str) -> dict[str, str]:
    """The variables of the build statement that compiles `source` (any target: torch_cuda,
    torch_python, kineto, ...): the one whose explicit input is the tree's `source`."""
    tree = build_ninja.parent.parent
    wanted = f"{tree}/{source}"
    found: dict[str, str] = {}
    lines = build_ninja.read_text(errors="replace").splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("build ") or ":" not in line:
            continue
        rule_and_inputs = line.split(": ", 1)[1].split()
        if len(rule_and_inputs) < 2 or rule_and_inputs[1] != wanted or "_COMPILER" not in rule_and_inputs[0]:
            continue
        found["rule"] = rule_and_inputs[0]
        for follow in lines[index + 1 :]:
            if not follow.startswith("  "):
                break
            key, _, value = follow.strip().partition(" = ")
            found[key] = value
        return found
    raise SystemExit(f"error: no compile statement for {source} in {build_ninja}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, required=True, help="configured build folder")
    parser.add_argument("--src", type=Path, required=True, help="source tree to compile")
    parser.add_argument("--cuda-home", type=Path, required=True)
    parser.add_argument("--arch", default="90", help="SM numbers, comma-separated: 90; 75,80; 110,120+PTX")
    parser.add_argument("--out", type=Path, required=True, help="folder for objects and logs")
    parser.add_argument("--host-cxx", default="/usr/bin/g++")
    parser.add_argument("tu", help="tree-relative source path")
    args = parser.parse_args()

    build = args.build.resolve()
    old_src = str(build.parent)
    stmt = ninja_statement(build / "build.ninja", args.tu)
    rules = (build / "CMakeFiles" / "rules.ninja").read_text()
    old_nvcc = re.search(r"(/[^\s$}]+)/bin/nvcc ", rules)  # after ${LAUNCHER}${CODE_CHECK}

    def move(text: str) -> str:
        # build/ stays (generated headers); every other tree path goes to --src
        text = text.replace(f"{old_src}/build", "\0BUILD\0").replace(old_src, str(args.src))
        text = text.replace("\0BUILD\0", str(build))
        if old_nvcc:
            text = text.replace(f"{old_nvcc[1]}/include", f"{args.cuda_home}/include")
        return text

    includes = move(stmt["INCLUDES"])
    if old_nvcc is None or f"{args.cuda_home}/include" not in includes:
        raise SystemExit(f"error: the CUDA include folder of {build} was not replaced by {args.cuda_home}")
    flags = move(stmt["FLAGS"])
    flags = re.sub(r"(-gencode arch=compute_\d+a?,code=\S+ ?)+", "", flags)
    out = args.out / (args.tu.replace("/", "__") + ".o")
    args.out.mkdir(parents=True, exist_ok=True)
    source = str(args.src / args.tu)
    if stmt["rule"].startswith("CUDA_COMPILER"):
        for arch in args.arch.split(","):  # "75,90": one -gencode each, as a multi-arch build has them
            number = arch.removesuffix("+PTX")
            flags += f" -gencode arch=compute_{number},code=sm_{number}"
            if arch.endswith("+PTX"):  # "120+PTX": the PTX too, as TORCH_CUDA_ARCH_LIST's 12.0+PTX
                flags += f" -gencode arch=compute_{number},code=compute_{number}"
        cmd = (
            f"{args.cuda_home}/bin/nvcc -forward-unknown-to-host-compiler -ccbin={args.host_cxx} "
            f"{stmt.get('DEFINES', '')} {includes} {flags} -x cu -c {shlex.quote(source)} -o {out}"
        )
    else:
        # what FindCUB's CUB_INCLUDE_DIRS gives C++ objects once CUB lives in include/cccl
        includes += f" -isystem {args.cuda_home}/include/cccl"
        cmd = (
            f"{args.host_cxx} {stmt.get('DEFINES', '')} {includes} {flags} -o {out} -c {shlex.quote(source)}"
        )
    log = out.with_suffix(".log")
    start = time.monotonic()
    proc = subprocess.run(shlex.split(cmd), capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    log.write_text(f"$ {cmd}\n{proc.stdout}{proc.stderr}\nrc={proc.returncode} seconds={seconds:.0f}\n")
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line]
    print(f"{args.tu}: rc={proc.returncode} {seconds:.0f}s errors={len(errors)} log={log}")
    for line in errors[:12]:
        print("  " + line[:300])
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

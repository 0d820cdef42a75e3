#!/usr/bin/env python3
"""Check condapipe's fatbin arch report against NVIDIA's own cuobjdump, binary by binary.

`condapipe verify --arch` is only worth trusting if what it reads out of `.nv_fatbin` is what
the CUDA driver sees. This script compares, for every ELF file it is given:

  1. the SASS/PTX arch sets that `condapipe verify --json` reports for a package's files
     with `cuobjdump --list-elf` / `--list-ptx` on the same files;
  2. condapipe's parsed entry sequence (kind, arch, compressed?) with the per-entry headers of
     `cuobjdump --dump-resource-usage` (same order, same count, same compression);
  3. the SASS/PTX multisets with `--list-elf` / `--list-ptx` (duplicates count).

One naming rule is applied, and reported: `--list-elf` names a family cubin (`sm_100f`) after
its base arch (`sm_100`), while cuobjdump's own entry header says `arch = sm_100f`, as
condapipe does. Every other difference is a bug in one of the two readers.

Inputs: packages (`--package`), loose ELF files (`--file`), and `--nvcc-matrix`, which compiles
a small kernel for every gencode set x compression mode x output kind in fatbin_matrix.yaml.
Exit status: 0 all equal, 1 differences, 2 bad usage, 3 missing tool (cuobjdump, nvcc).
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MATRIX = HERE / "fatbin_matrix.yaml"
KERNEL = r"""
#include <cstdio>
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
template <typename T> __global__ void add(T *x, T b) { x[threadIdx.x] += b; }
template __global__ void add<double>(double *, double);
extern "C" void launch_scale(float *x, float a) { scale<<<1, 32>>>(x, a); }
#ifdef FATBIN_COMPARE_MAIN
int main() { std::printf("%p\n", (void *)launch_scale); return 0; }
#endif
"""
_LIST_RE = re.compile(r"^(?:ELF|PTX) file\s+\d+:\s+\S+\.(sm_\d+[a-z]?)\.(?:cubin|ptx)\s*$", re.M)
_HEADER_RE = re.compile(r"^Fatbin (elf|ptx) code:\s*$")


class ToolMissing(RuntimeError):
    """A program this comparison needs is not installed (exit 3)."""


@dataclass
class Comparison:
    """condapipe vs cuobjdump on one ELF file."""

    binary: str
    source: str  # package file, loose file or matrix cell
    ours_sass: list[str] = field(default_factory=list)
    ours_ptx: list[str] = field(default_factory=list)
    ours_compressed: int = 0
    theirs_sass: list[str] = field(default_factory=list)
    theirs_ptx: list[str] = field(default_factory=list)
    theirs_compressed: int = 0
    verify_sass: list[str] | None = None  # from `condapipe verify --json` (packages only)
    verify_ptx: list[str] | None = None
    normalised: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    ours_ms: float = 0.0
    cuobjdump_ms: float = 0.0

    @property
    def equal(self) -> bool:
        return not self.differences


def find_cuobjdump(explicit: str | None = None) -> str:
    """cuobjdump from --cuobjdump, $CUOBJDUMP, PATH, the CUDA toolkit or the nvidia pip wheel."""
    for cand in (explicit, os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump")):
        if cand:
            if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
                raise ToolMissing(f"cuobjdump {cand} is not an executable file")
            return cand
    cands = sorted(glob.glob("/usr/local/cuda*/bin/cuobjdump"))
    try:
        import nvidia  # the nvidia-cuda-cuobjdump wheel: nvidia/cu13/bin/cuobjdump

        cands += [c for base in nvidia.__path__ for c in sorted(glob.glob(f"{base}/cu*/bin/cuobjdump"))]
    except ImportError:
        pass
    if not cands:
        raise ToolMissing(
            "cuobjdump not found (install the CUDA toolkit or `pip install nvidia-cuda-cuobjdump`, "
            "or pass --cuobjdump PATH)"
        )
    return cands[0]


def _cuobjdump(tool: str, option: str, path: Path) -> str:
    proc = subprocess.run([tool, option, str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if "does not contain device code" in proc.stderr + proc.stdout:
            return ""
        raise RuntimeError(f"cuobjdump {option} {path} failed: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def cuobjdump_view(tool: str, path: Path) -> tuple[list[str], list[str], list[tuple[str, str, bool]]]:
    """(list-elf archs, list-ptx archs, resource-usage entry headers) as cuobjdump prints them."""
    elf = _LIST_RE.findall(_cuobjdump(tool, "--list-elf", path))
    ptx = _LIST_RE.findall(_cuobjdump(tool, "--list-ptx", path))
    headers: list[list] = []  # [kind, arch, compressed] per "Fatbin elf|ptx code:" block
    for line in _cuobjdump(tool, "--dump-resource-usage", path).splitlines():
        if found := _HEADER_RE.match(line):
            headers.append([found.group(1), "?", False])
        elif headers and line.startswith("arch = "):
            headers[-1][1] = line.split("=", 1)[1].strip()
        elif headers and line.strip() == "compressed":
            headers[-1][2] = True
    return elf, ptx, [(k, a, c) for k, a, c in headers]


def our_view(path: Path) -> list[tuple[str, str, bool]]:
    """condapipe's entries as (kind, arch, compressed), in the spelling cuobjdump uses (sm_XY)."""
    from condapipe.elf.fatbin import KIND_ELF, read_fatbin

    return [
        ("elf" if e.kind == KIND_ELF else "ptx", f"sm_{e.arch}{e.suffix}", e.compression is not None)
        for e in read_fatbin(path).entries
    ]


def compare_file(tool: str, path: Path, source: str, verify: dict | None = None) -> Comparison:
    """Compare one ELF file; `verify` is its entry of `condapipe verify --json`'s fatbins."""
    t0 = time.perf_counter()
    ours = our_view(path)
    t1 = time.perf_counter()
    list_elf, list_ptx, headers = cuobjdump_view(tool, path)
    t2 = time.perf_counter()
    cmp = Comparison(binary=path.name, source=source, ours_ms=(t1 - t0) * 1e3, cuobjdump_ms=(t2 - t1) * 1e3)
    cmp.ours_sass = sorted(a for k, a, _ in ours if k == "elf")
    cmp.ours_ptx = sorted(a for k, a, _ in ours if k == "ptx")
    cmp.ours_compressed = sum(c for *_, c in ours)
    cmp.theirs_ptx = sorted(list_ptx)
    cmp.theirs_compressed = sum(c for *_, c in headers)
    # --list-elf drops a family cubin's "f"; take the arch from the entry header when it does.
    family = Counter(a for k, a, _ in headers if k == "elf" and a.endswith("f"))
    theirs_sass = []
    for arch in list_elf:
        if family[arch + "f"] > 0:
            family[arch + "f"] -= 1
            cmp.normalised.append(f"--list-elf {arch} is the family cubin {arch}f (entry header)")
            arch += "f"
        theirs_sass.append(arch)
    cmp.theirs_sass = sorted(theirs_sass)
    if cmp.ours_sass != cmp.theirs_sass:
        cmp.differences.append(f"SASS: condapipe {cmp.ours_sass} vs cuobjdump --list-elf {cmp.theirs_sass}")
    if cmp.ours_ptx != cmp.theirs_ptx:
        cmp.differences.append(f"PTX: condapipe {cmp.ours_ptx} vs cuobjdump --list-ptx {cmp.theirs_ptx}")
    if ours != headers:
        cmp.differences.append(f"entries (kind, arch, compressed): condapipe {ours} vs cuobjdump {headers}")
    if verify is not None:
        cmp.verify_sass = list(verify.get("sass", []))
        cmp.verify_ptx = list(verify.get("ptx", []))
        want_sass = sorted(set(cmp.theirs_sass))
        want_ptx = sorted({"compute_" + a.removeprefix("sm_") for a in cmp.theirs_ptx})
        if cmp.verify_sass != want_sass or cmp.verify_ptx != want_ptx:
            cmp.differences.append(
                f"condapipe verify reports SASS {cmp.verify_sass} PTX {cmp.verify_ptx}, "
                f"cuobjdump lists SASS {want_sass} PTX {want_ptx}"
            )
    return cmp


# -- inputs ---------------------------------------------------------------------------------------


def _condapipe_cmd() -> list[str]:
    """$CONDAPIPE, else `condapipe` on PATH, else this Python running condapipe's CLI."""
    if os.environ.get("CONDAPIPE"):
        return os.environ["CONDAPIPE"].split()
    if exe := shutil.which("condapipe"):
        return [exe]
    return [sys.executable, "-c", "from condapipe.cli.main import main; main(prog_name='condapipe')"]


def package_comparisons(tool: str, package: Path, work: Path) -> list[Comparison]:
    """Every ELF file of a package: verify's fatbin report and the parser, against cuobjdump."""
    from condapipe.package.io import unpack

    proc = subprocess.run(
        [*_condapipe_cmd(), "verify", "--json", str(package)], capture_output=True, text=True, check=False
    )
    try:
        (report,) = json.loads(proc.stdout)
    except (ValueError, TypeError) as exc:
        raise RuntimeError(
            f"condapipe verify --json {package} gave no report: {last_line(proc.stderr)}"
        ) from exc
    fatbins = report.get("fatbins", {})
    root = unpack(package, work / package.name.replace(".", "_"))
    out = []
    for rel in sorted(_elf_files(root)):
        cmp = compare_file(tool, root / rel, f"{package.name}:{rel}", fatbins.get(rel, {}))
        cmp.binary = rel
        out.append(cmp)
    return out


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1] if lines else ""


def _elf_files(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.relative_to(root).parts[0] != "info":
            with open(path, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    found.append(str(path.relative_to(root)))
    return found


def load_matrix(path: Path) -> dict:
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(path.read_text())


def matrix_cells(matrix: dict, only: list[str]) -> list[tuple[str, list[str], str]]:
    """(name, nvcc flags, suffix) of every cell whose name contains all `only` words."""
    cells = []
    for (g, codes), (c, cflags), (o, out) in itertools.product(
        matrix["gencodes"].items(), matrix["compression"].items(), matrix["outputs"].items()
    ):
        name = f"{g}.{c}.{o}"
        if all(word in name for word in only):
            flags = [x for code in codes for x in ("-gencode", code)] + list(cflags) + list(out["flags"])
            cells.append((name, flags, out["suffix"]))
    return cells


def build_cell(nvcc: str, work: Path, name: str, flags: list[str], suffix: str) -> Path:
    src = work / "kernel.cu"
    out = work / f"{name}{suffix or '.exe'}"
    proc = subprocess.run(
        [nvcc, "-O2", *flags, "-o", str(out), str(src)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc {' '.join(flags)} failed: {proc.stderr.strip()[-500:]}")
    return out


# -- output ---------------------------------------------------------------------------------------


def markdown(rows: list[Comparison]) -> str:
    lines = [
        "| binary | source | condapipe SASS | condapipe PTX | compressed (ours/theirs) | cuobjdump | equal |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        theirs = " ".join(r.theirs_sass + [f"ptx:{p}" for p in r.theirs_ptx]) or "no device code"
        ptx = " ".join(p.replace("sm_", "compute_", 1) for p in r.ours_ptx)
        lines.append(
            f"| {r.binary} | {r.source} | {' '.join(r.ours_sass) or '-'} | {ptx or '-'} "
            f"| {r.ours_compressed}/{r.theirs_compressed} | {theirs} | {'yes' if r.equal else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def summary(rows: list[Comparison], seconds: float) -> dict:
    with_code = [r for r in rows if r.ours_sass or r.ours_ptx or r.theirs_sass or r.theirs_ptx]
    return {
        "binaries": len(rows),
        "with_device_code": len(with_code),
        "entries": sum(len(r.ours_sass) + len(r.ours_ptx) for r in rows),
        "compressed_entries": sum(r.ours_compressed for r in rows),
        "equal": sum(r.equal for r in rows),
        "different": sum(not r.equal for r in rows),
        "normalised_family_names": sum(len(r.normalised) for r in rows),
        "condapipe_ms_total": round(sum(r.ours_ms for r in rows), 1),
        "cuobjdump_ms_total": round(sum(r.cuobjdump_ms for r in rows), 1),
        "seconds": round(seconds, 1),
    }


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", action="append", default=[], type=Path, help="conda package (repeatable)")
    ap.add_argument("--file", action="append", default=[], type=Path, help="ELF file (repeatable)")
    ap.add_argument("--nvcc-matrix", action="store_true", help="compile and compare fatbin_matrix.yaml")
    ap.add_argument("--only", action="append", default=[], help="matrix cells whose name has this word")
    ap.add_argument("--matrix", type=Path, default=MATRIX)
    ap.add_argument("--nvcc", default=None, help="nvcc to use (default: on PATH)")
    ap.add_argument("--cuobjdump", default=None)
    ap.add_argument("--work", type=Path, default=None, help="scratch dir (default: a temporary one)")
    ap.add_argument("--json-out", type=Path, help="write every comparison and the summary as JSON")
    ap.add_argument("--md-out", type=Path, help="write the comparison table as Markdown")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    if not (args.package or args.file or args.nvcc_matrix):
        print("error: nothing to compare: give --package, --file or --nvcc-matrix", file=sys.stderr)
        return 2
    for p in [*args.package, *args.file]:
        if not p.is_file():
            print(f"error: {p}: no such file", file=sys.stderr)
            return 2
    try:
        tool = find_cuobjdump(args.cuobjdump)
        nvcc = (args.nvcc or shutil.which("nvcc")) if args.nvcc_matrix else None
        if args.nvcc_matrix and not nvcc:
            raise ToolMissing("--nvcc-matrix needs nvcc on PATH (or --nvcc PATH)")
    except ToolMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fatbin-compare-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        try:
            rows = _collect(args, tool, nvcc, work)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    result = {"cuobjdump": _version(tool), "summary": summary(rows, time.perf_counter() - start)}
    result["comparisons"] = [asdict(r) | {"equal": r.equal} for r in rows]
    if args.json_out:
        _write(args.json_out, json.dumps(result, indent=1) + "\n")
    table = markdown(rows)
    if args.md_out:
        _write(args.md_out, table)
    print(table)
    for r in rows:
        for d in r.differences:
            print(f"DIFFERENT {r.source}: {d}")
    s = result["summary"]
    print(
        f"{s['equal']}/{s['binaries']} binaries equal ({s['with_device_code']} with device code, "
        f"{s['entries']} entries, {s['compressed_entries']} compressed; {s['normalised_family_names']} "
        f"family cubin names taken from entry headers); condapipe {s['condapipe_ms_total']} ms, "
        f"cuobjdump {s['cuobjdump_ms_total']} ms; {result['cuobjdump']}"
    )
    return 0 if s["different"] == 0 else 1


def _collect(args: argparse.Namespace, tool: str, nvcc: str | None, work: Path) -> list[Comparison]:
    rows: list[Comparison] = []
    for pkg in args.package:
        rows += package_comparisons(tool, pkg, work)
    rows += [compare_file(tool, f, str(f)) for f in args.file]
    if nvcc:
        (work / "kernel.cu").write_text(KERNEL)
        cells = matrix_cells(load_matrix(args.matrix), args.only)
        if not cells:
            raise RuntimeError(f"no matrix cell matches {args.only}")
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            built = list(pool.map(lambda c: build_cell(nvcc, work, *c), cells))
            names = [name for name, _, _ in cells]
            rows += list(
                pool.map(lambda nb: compare_file(tool, nb[1], nb[0]), zip(names, built, strict=True))
            )
    return rows


def _version(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout
    found = re.search(r"release \S+, V\S+", out)
    return f"cuobjdump {found.group(0) if found else 'unknown version'} ({tool})"


if __name__ == "__main__":
    sys.exit(main())

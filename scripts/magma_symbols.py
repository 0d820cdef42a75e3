#!/usr/bin/env python3
"""Does libmagma.a define every function its installed headers declare?

usage: magma_symbols.py LIBMAGMA_A INCLUDE_DIR [INCLUDE_DIR ...] [--cuda-include DIR ...]
           [--cuda-lib DIR ...] [--lapack "-llapack -lblas"] [--source MAGMA_TREE] [--json OUT]

1. Declared functions: every header in the include dirs (the package's include/) is compiled in
   its own C translation unit (after magma_v2.h, or magma.h for the v1 API headers) with
   `gcc -aux-info`, which writes one prototype per function declaration the TU sees, with the
   file and line it comes from. Non-static declarations from a header of the include dirs
   count; magma_lapack.h / magma_?lapack.h are left out (they declare the CPU LAPACK/BLAS
   Fortran routines magma calls, which the program supplies: MKL in pytorch). C++-only
   headers (magma_operators.h: inline functions only) cannot be read in C and are listed.
2. Defined: `nm --defined-only` over the archive.
3. Link: a C file referencing every declared name is linked with -Wl,--no-undefined into a
   shared object against the archive, cuBLAS, cuSPARSE, cudart (and --lapack), so undefined
   symbols of the archive members those names pull in are reported too.

Exit status 0 when every declared function is defined and the link succeeds. With --source
(the generated magma tree the library was built from), declared names that no file of upstream's
own library list (CMake.src.cuda: libmagma_all) defines are reported as upstream's and do not fail
the check; declared names such a file defines but the archive lacks (a file a patch left out,
as the old CUDA-12 patch did with *gemm_fermi.cu), and any other undefined symbol, fail it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

V1_HEADERS = re.compile(r"^(magma\.h|magmablas_v1.*\.h|magma.*_v1(_map)?\.h)$")
LAPACK_HEADERS = re.compile(r"^magma_[sdcz]?lapack\.h$")
# one -aux-info line: /* path:line:XY */ prototype ;   X: N(ew)/O(ld-style), Y: C(decl)/F(def)
AUX_LINE = re.compile(r"^/\* (?P<file>.+):(?P<line>\d+):(?P<kind>[NOI][CF]) \*/ (?P<proto>.*);\s*$")
NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:/\*.*\*/)?\s*$")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def declared_functions(
    incs: list[Path], cuda_incs: list[Path], work: Path
) -> tuple[dict[str, str], dict[str, str]]:
    """name -> 'header:line' for every non-static function declared in the headers; and
    header -> error for headers that do not compile as C."""
    found: dict[str, str] = {}
    skipped: dict[str, str] = {}
    inc_roots = [str(p.resolve()) for p in incs]
    flags = ["-DADD_", "-DMAGMA_HAVE_CUDA"]
    flags += [f"-I{p}" for p in [*incs, *cuda_incs]]
    headers = sorted({h.name: h for inc in incs for h in inc.glob("*.h")}.items())
    for name, _ in headers:
        if LAPACK_HEADERS.match(name) or name in ("magma_mangling_cmake.h",):
            continue
        first = "magma.h" if V1_HEADERS.match(name) else "magma_v2.h"
        tu = work / f"tu_{name}.c"
        tu.write_text(f'#include "{first}"\n#include "{name}"\n')
        aux = work / f"aux_{name}.txt"
        res = run(["gcc", "-std=gnu99", "-fsyntax-only", "-w", f"-aux-info={aux}", *flags, str(tu)])
        if res.returncode != 0 or not aux.exists():
            errors = [ln for ln in res.stderr.splitlines() if "error" in ln]
            skipped[name] = (errors or res.stderr.strip().splitlines() or ["?"])[0]
            continue
        for line in aux.read_text(errors="replace").splitlines():
            m = AUX_LINE.match(line)
            if not m or m["kind"][1] != "C":
                continue
            path = str(Path(m["file"]).resolve())
            if not any(path.startswith(r + "/") for r in inc_roots):
                continue
            if LAPACK_HEADERS.match(Path(path).name):
                continue
            proto = m["proto"]
            if re.match(r"^\s*static\b", proto):
                continue
            n = NAME.search(proto)
            if n:
                found.setdefault(n.group(1), f"{Path(path).name}:{m['line']}")
    # C++-only declarations (#ifdef __cplusplus): the headers that have such sections
    for name, path in headers:
        if LAPACK_HEADERS.match(name) or "__cplusplus" not in path.read_text(errors="replace"):
            continue
        first = "magma.h" if V1_HEADERS.match(name) else "magma_v2.h"
        for n, loc in cxx_only_declarations(name, first, flags, inc_roots, work).items():
            found.setdefault(n, loc)
    return found, skipped


LINEMARK = re.compile(r'^# (\d+) "([^"]*)"')
CXX_DECL = re.compile(
    r"^(?:extern\s+)?(?!typedef\b|static\b|inline\b|template\b|return\b|using\b)"
    r"[A-Za-z_][\w\s\*&:<>,]*?\b(magma\w*)\s*\([^;{}=]*\)\s*(?:const\s*)?$",
    re.S,
)


def cxx_only_declarations(
    header: str, first: str, flags: list[str], inc_roots: list[str], work: Path
) -> dict[str, str]:
    """Declarations gcc -aux-info (C) cannot see: those under #ifdef __cplusplus (the half-precision
    API). g++ -E, then top-level statements (or inside extern "C" { }) from the include dirs that
    look like `type magma...( ... );`."""
    tu = work / f"tu_{header}.cpp"
    tu.write_text(f'#include "{first}"\n#include "{header}"\n')
    res = run(["g++", "-std=c++11", "-E", "-w", *flags, str(tu)])
    if res.returncode != 0:
        return {}
    found: dict[str, str] = {}
    text, where = [], []
    cur_file, cur_line = "", 0
    for line in res.stdout.splitlines():
        m = LINEMARK.match(line)
        if m:
            cur_line, cur_file = (
                int(m.group(1)),
                str(Path(m.group(2)).resolve()) if m.group(2)[:1] != "<" else m.group(2),
            )
            continue
        inside = any(cur_file.startswith(r + "/") for r in inc_roots) and not LAPACK_HEADERS.match(
            Path(cur_file).name
        )
        text.append(line if inside else "")
        where.append(f"{Path(cur_file).name}:{cur_line}")
        cur_line += 1
    stack: list[str] = []  # "c" for extern "C" / namespace blocks, "b" for any other brace
    stmt, stmt_line = [], 0
    for i, line in enumerate(text):
        for ch in line:
            if ch == "{":
                head = "".join(stmt).strip()
                stack.append("c" if head.endswith('extern "C"') or head.startswith("namespace") else "b")
                stmt = []
            elif ch == "}":
                if stack:
                    stack.pop()
                stmt = []
            elif ch == ";":
                s = " ".join("".join(stmt).split())
                if all(k == "c" for k in stack):
                    m = CXX_DECL.match(s)
                    if m:
                        found.setdefault(m.group(1), where[stmt_line])
                stmt = []
            else:
                if not stmt and not ch.isspace():
                    stmt_line = i
                if stmt or not ch.isspace():
                    stmt.append(ch)
        if stmt:
            stmt.append(" ")
    return found


def _strip_if0(text: str) -> str:
    """Drop #if 0 ... #endif regions (nesting-aware), which never reach the compiler."""
    out, depth = [], 0
    for line in text.splitlines():
        s = line.strip()
        if depth:
            if re.match(r"#\s*if", s):
                depth += 1
            elif re.match(r"#\s*endif", s):
                depth -= 1
            elif depth == 1 and re.match(r"#\s*(else|elif)", s):
                depth = 0
            continue
        if re.match(r"#\s*if\s+0\b", s):
            depth = 1
            continue
        out.append(line)
    return "\n".join(out)


def upstream_definitions(source: Path, names: list[str]) -> dict[str, list[str]]:
    """name -> files of magma's own library source list (libmagma_all in the tree's CMake.src.cuda,
    generated from its Makefile.src; the project's CMakeLists patches act after it) that define it
    magma-style (name at the start of a line, its parameter list, then a body), #if 0 regions left
    out. An empty list: upstream's library never builds a definition (a stale prototype, a file
    left out of upstream's own list, or code disabled upstream)."""
    listing = (source / "CMake.src.cuda").read_text()
    block = re.search(r"set\(\s*libmagma_all(.*?)\)", listing, re.S)
    files = [f for f in block.group(1).split() if f.endswith((".c", ".cpp", ".cu"))] if block else []
    texts = {f: _strip_if0((source / f).read_text(errors="replace")) for f in files if (source / f).is_file()}
    out: dict[str, list[str]] = {}
    for n in names:
        pat = re.compile(r"^" + re.escape(n) + r"\s*\(([^;{}]*)\)\s*(?://[^\n]*\s*)*\{", re.M)
        out[n] = sorted(f for f, text in texts.items() if pat.search(text))
    return out


def defined_symbols(lib: Path) -> set[str]:
    res = run(["nm", "--defined-only", "-g", str(lib)])
    out = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TWDBRVuiSG":
            out.add(parts[2])
    return out


def link(
    lib: Path, names: list[str], work: Path, cuda_libs: list[Path], lapack: str
) -> tuple[bool, list[str], str]:
    src = work / "refs.c"
    body = "".join(f"extern void {n}(void);\n" for n in names)
    body += (
        "void (*const condapipe_magma_refs[])(void) = {\n" + "".join(f"    {n},\n" for n in names) + "};\n"
    )
    src.write_text(body)
    cmd = [
        "g++",
        "-shared",
        "-fPIC",
        "-o",
        str(work / "refs.so"),
        "-x",
        "c",
        str(src),
        "-x",
        "none",
        str(lib),
        "-Wl,--no-undefined",
    ]
    for d in cuda_libs:
        cmd += [f"-L{d}", f"-Wl,-rpath-link,{d}"]
    cmd += [
        "-lcublas",
        "-lcusparse",
        "-lcudart",
        "-lcudadevrt",
        *lapack.split(),
        "-lgomp",
        "-lpthread",
        "-lm",
        "-ldl",
    ]
    res = run(cmd)
    undefined = sorted({u.strip() for u in re.findall(r"undefined reference to `([^']+)'", res.stderr)})
    return res.returncode == 0, undefined, " ".join(cmd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lib", type=Path)
    ap.add_argument("include", type=Path, nargs="+")
    ap.add_argument(
        "--cuda-include",
        type=Path,
        action="append",
        default=[],
        help="CUDA/cuBLAS/cuSPARSE header dir (repeatable; default /usr/local/cuda/include)",
    )
    ap.add_argument("--cuda-lib", type=Path, action="append", default=[])
    ap.add_argument("--lapack", default="-llapack -lblas", help="CPU LAPACK/BLAS link flags ('' for none)")
    ap.add_argument(
        "--source",
        type=Path,
        help="the (generated) magma tree the library was built from: sort missing names "
        "into ones upstream's own library never builds and ones this build lost",
    )
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    cuda_libs = a.cuda_lib or [Path("/usr/local/cuda/lib64")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        declared, skipped = declared_functions(
            a.include, a.cuda_include or [Path("/usr/local/cuda/include")], work
        )
        defined = defined_symbols(a.lib)
        missing = sorted(n for n in declared if n not in defined)
        ok_link, undefined, cmd = link(a.lib, sorted(declared), work, cuda_libs, a.lapack)
        stale: dict[str, list[str]] = upstream_definitions(a.source, missing) if a.source else {}
        never = [n for n in missing if a.source and not stale[n]]
        ok_link2, undefined2 = ok_link, undefined
        if never:  # again without upstream's never-built names: everything else must link
            ok_link2, undefined2, _ = link(
                a.lib, sorted(set(declared) - set(never)), work, cuda_libs, a.lapack
            )
    lost = [n for n in missing if not a.source or stale[n]]
    unreadable = sorted(skipped) or "none"
    print(f"headers read: declared {len(declared)} functions; C++-only/unreadable headers: {unreadable}")
    print(f"libmagma.a defines {len(defined)} global symbols")
    print(f"declared but not defined in the archive: {len(missing)}")
    if a.source:
        print(
            f"  of them not built by upstream's own library either (stale prototypes, files left out "
            f"of upstream's list, #if 0 code): {len(never)}"
        )
        for n in never:
            print(f"    {n}  ({declared[n]})")
        print(
            f"  of them defined by a file of upstream's library list but missing from the archive "
            f"(lost by this build): {len(lost)}"
        )
    for n in lost:
        where = f"; source: {', '.join(stale[n][:3])}" if a.source else ""
        print(f"    {n}  ({declared[n]}{where})")
    extra = [n for n in undefined if n not in declared]
    print(
        f"link of all {len(declared)} with -Wl,--no-undefined: {'OK' if ok_link else 'FAILED'}; "
        f"undefined references: {len(undefined)} ({len(undefined) - len(extra)} of them declared names, "
        f"{len(extra)} other symbols the pulled-in objects need)"
    )
    for n in extra:
        print(f"    {n}")
    if never:
        print(
            f"link of the {len(declared) - len(never)} others (all but upstream's never-built) with "
            f"-Wl,--no-undefined: {'OK' if ok_link2 else 'FAILED'}; undefined references: {len(undefined2)}"
        )
        for n in undefined2:
            print(f"    {n}")
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "declared": len(declared),
                    "skipped_headers": skipped,
                    "missing": {n: declared[n] for n in missing},
                    "never_defined_upstream": never,
                    "lost_by_build": lost,
                    "link_ok": ok_link,
                    "link_undefined": undefined,
                    "link_undefined_not_declared": extra,
                    "link_cmd": cmd,
                    "link_without_never_built_ok": ok_link2,
                    "link_without_never_built_undefined": undefined2,
                },
                indent=1,
            )
        )
    if a.source:  # stale upstream prototypes are reported, not failed
        return 0 if not lost and ok_link2 else 1
    return 0 if not missing and ok_link else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Prove on a real NVIDIA GPU that arch lists, fatbin verification and `--arch native` hold.

Wrong arch lists fail silently at build time and loudly on users' GPUs ("no kernel image is
available for execution on the device"). For each case of gpu_proof.yaml this script runs the
real CLI end to end and then the package itself:

  1. `condapipe build cuda-smoke --cuda X --arch A --json` (doctor, render, rattler-build with
     nvcc, fix, verify, the package's own test, index): the package test runs the kernel, so on a
     GPU without a kernel image for it the build must fail; the package is then rebuilt with
     --no-test so that the next steps can show what a user would get;
  2. `condapipe verify --arch GATE`: a package without GATE's SASS must be rejected, and is then
     not uploaded (`condapipe upload --to` a local channel happens only after the gate passes);
  3. install it with py-rattler into a fresh prefix, run `cuda-smoke` (PTX JIT cache disabled, so a
     JIT run really compiles), and again with CUDA_DISABLE_PTX_JIT=1 to tell SASS from JIT runs.

What each case must do is derived from the GPU's compute capability (nvidia-smi), not written
down: SASS runs on GPUs of its major arch with an equal or higher minor, PTX is JIT-compiled
for any newer GPU. Without a GPU the script still builds, verifies and installs, shows that
`--arch native` fails with a clear message, and says which checks it could not make.

Exit status: 0 every expectation held on a GPU; 1 one failed; 3 no GPU (GPU checks not made).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE / "gpu_proof.yaml"
NO_KERNEL = "no kernel image is available"
JIT_DISABLED = "PTX JIT compilation was disabled"  # cudaErrorJitCompilationDisabled


# -- expectations -------------------------------------------------------------------------------


def expected_run(arch_list: str, gpu: tuple[int, int]) -> str:
    """How a binary built for `arch_list` runs on a GPU of compute capability `gpu`.

    "sass": a cubin runs as is; "jit": only PTX fits, the driver compiles it;
    "no-kernel-image": the launch fails.
    """
    from condapipe.facts.arch import parse_arch_list

    major, minor = gpu
    archs = list(parse_arch_list(arch_list))
    if any(
        (a.major, a.minor) == gpu if a.suffix == "a" else a.major == major and a.minor <= minor for a in archs
    ):
        return "sass"
    if any(a.ptx and not a.suffix and (a.major, a.minor) <= gpu for a in archs):
        return "jit"
    return "no-kernel-image"


def gate_accepts(arch_list: str, gate: str) -> bool:
    """Whether a package built for `arch_list` holds every image `condapipe verify --arch gate` wants."""
    from condapipe.facts.arch import parse_arch_list

    built, want = parse_arch_list(arch_list), parse_arch_list(gate)
    return want.sass() <= built.sass() and want.ptx() <= built.ptx()


def classify_run(returncode: int, output: str) -> str:
    """The outcome of one `cuda-smoke` run: ok, no-kernel-image, jit-disabled, no-gpu or error."""
    if returncode == 0 and "cuda-smoke: OK" in output:
        return "ok"
    if NO_KERNEL in output:
        return "no-kernel-image"
    if JIT_DISABLED in output:
        return "jit-disabled"
    if returncode == 2 and "no GPU available" in output:
        return "no-gpu"
    return "error"


def gpu_capability() -> tuple[tuple[int, int] | None, str]:
    """(compute capability of GPU 0, its name) from nvidia-smi, or (None, why not)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "nvidia-smi is not on PATH"
    proc = subprocess.run(
        [exe, "--query-gpu=compute_cap,name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    if proc.returncode != 0 or not lines:
        return None, last_line(proc.stderr or proc.stdout) or "nvidia-smi lists no GPU"
    cap, name, driver = (x.strip() for x in lines[0].split(",", 2))
    major, minor = cap.split(".")
    return (int(major), int(minor)), f"{name} (sm_{major}{minor}, driver {driver})"


# -- one case -------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    arch: str
    resolved: str = ""
    build: str = ""  # "ok (12.3 s, test passed)" or "exit N: message"
    build_seconds: float = 0.0
    rebuilt_without_test: bool = False
    first_build: str = ""  # the build with tests, when it failed and the package was rebuilt
    package: str = ""
    fatbin: str = ""  # SASS/PTX of lib/libcuda_smoke.so as `condapipe verify --json` reports it
    gate: str = ""  # "accepted" / "rejected: ..."
    upload: str = ""
    install_seconds: float = 0.0
    build_info: str = ""
    run: str = ""
    run_seconds: float = 0.0
    run_output: str = ""
    run_jit_off: str = ""
    run_jit_off_output: str = ""
    expected: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


def condapipe_cmd() -> list[str]:
    """$CONDAPIPE, else `condapipe` on PATH, else this Python running condapipe's CLI."""
    if os.environ.get("CONDAPIPE"):
        return os.environ["CONDAPIPE"].split()
    if exe := shutil.which("condapipe"):
        return [exe]
    return [sys.executable, "-c", "from condapipe.cli.main import main; main(prog_name='condapipe')"]


def cli(*args: str, cwd: Path) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([*condapipe_cmd(), *args], capture_output=True, text=True, cwd=cwd, check=False)
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else ""


def build(case: Case, cfg: dict, work: Path, no_test: bool) -> dict | None:
    args = ["build", "cuda-smoke", "--cuda", cfg["cuda"], "--arch", case.arch, "--json"]
    args += ["--output-dir", str(work / "channel"), "--work-dir", str(work / "condapipe-work")]
    started = time.time()
    code, out, err, secs = cli(*args, *(["--no-test"] if no_test else []), cwd=work)
    case.build_seconds += secs
    if code == 0:
        result = json.loads(out)
        (details,) = result["package_details"]
        steps = {s["kind"]: s["status"] for s in result.get("steps", [])}
        reused = (
            "; engine step reused: same inputs as an earlier case"
            if steps.get("build") == "unchanged"
            else ""
        )
        case.build = f"ok ({secs:.1f} s, test {details.get('tests') or 'skipped'}{reused})"
        return result
    case.build = f"exit {code}: {last_line(err)}"
    logs = [p for p in (work / "condapipe-work" / "logs").glob("*.log") if p.stat().st_mtime >= started - 1]
    if any(NO_KERNEL in p.read_text(errors="replace") for p in logs):
        case.build += f" [log: {NO_KERNEL}]"
    return None


def install(channel: Path, package: Path, prefix: Path, cache: Path) -> None:
    """py-rattler: solve the exact package from the local channel, install into a fresh prefix."""
    import rattler

    build_string = package.name.removesuffix(".conda").rsplit("-", 1)[1]

    async def go() -> None:
        records = await rattler.solve(
            [rattler.Channel(str(channel))],
            [f"cuda-smoke ==1.0.0 {build_string}"],
            platforms=["linux-64", "noarch"],
        )
        await rattler.install(records, prefix, cache_dir=cache, show_progress=False)

    asyncio.run(go())


def run_binary(exe: Path, *args: str, jit: bool = True) -> tuple[int, str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "CUDA_DISABLE_PTX_JIT")}
    env["CUDA_CACHE_DISABLE"] = "1"  # a JIT run compiles the PTX every time instead of reusing a cache
    if not jit:
        env["CUDA_DISABLE_PTX_JIT"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, check=False)
    return proc.returncode, (proc.stdout + proc.stderr).strip(), time.perf_counter() - t0


def run_case(case: Case, cfg: dict, work: Path, gpu: tuple[int, int] | None, native: str) -> None:
    result = build(case, cfg, work, no_test=False)
    if result is None and gpu is not None and case.arch != "native":
        # The package test launched the kernel and failed; get the package to show the next steps.
        case.rebuilt_without_test = True
        case.first_build = case.build
        result = build(case, cfg, work, no_test=True)
    if result is None:
        return
    (details,) = result["package_details"]
    case.resolved = details["archs"]
    pkg = Path(details["path"])
    case.package = pkg.name
    code, out, err, _ = cli("verify", "--json", str(pkg), cwd=work)
    fat = json.loads(out)[0]["fatbins"].get("lib/libcuda_smoke.so", {}) if out.strip() else {}
    case.fatbin = " ".join(fat.get("sass", []) + fat.get("ptx", [])) or f"? ({last_line(err)})"

    code, out, err, _ = cli("verify", "--json", "--arch", cfg["gate"], str(pkg), cwd=work)
    if code == 0:
        case.gate = "accepted"
        up, _, uerr, _ = cli("upload", "--to", str(work / "uploaded"), "--json", str(pkg), cwd=work)
        case.upload = "uploaded" if up == 0 else f"upload failed (exit {up}): {last_line(uerr)}"
    else:
        errors = json.loads(out)[0]["errors"] if out.strip() else [last_line(err)]
        case.gate = f"rejected (exit {code}): {errors[0] if errors else '?'}"
        case.upload = "not uploaded"

    prefix = work / "prefixes" / case.name
    shutil.rmtree(prefix, ignore_errors=True)
    t0 = time.perf_counter()
    install(work / "channel", pkg, prefix, work / "pkgs-cache")
    case.install_seconds = time.perf_counter() - t0
    exe = prefix / "bin" / "cuda-smoke"
    case.build_info = run_binary(exe, "--build-info")[1]
    code, output, secs = run_binary(exe, "1000000")
    case.run, case.run_output, case.run_seconds = classify_run(code, output), last_line(output), secs
    code, output, _ = run_binary(exe, "1000000", jit=False)
    case.run_jit_off, case.run_jit_off_output = classify_run(code, output), last_line(output)


def check(case: Case, cfg: dict, gpu: tuple[int, int] | None, native: str) -> None:
    """Fill case.expected and record each expectation that failed or could not be checked."""
    if case.arch == "native" and gpu is None:
        case.expected["build"] = "exit 3 with a one-line reason (no GPU to resolve native)"
        if not (case.build.startswith("exit 3: error: --arch native") and "nvidia-smi" in case.build):
            case.failures.append(f"native without a GPU: expected a clear exit 3, got {case.build!r}")
        case.unchecked.append("run: no GPU")
        return
    want_list = native if case.arch == "native" else case.arch
    case.expected["resolved"] = want_list
    if not case.package:
        case.failures.append(f"no package: {case.build}")
        return
    from condapipe.facts.arch import parse_arch_list

    if parse_arch_list(case.resolved).torch_arch_list() != parse_arch_list(want_list).torch_arch_list():
        case.failures.append(f"--arch {case.arch} resolved to {case.resolved}, expected {want_list}")
    accept = gate_accepts(case.resolved, cfg["gate"])
    case.expected["gate"] = "accepted" if accept else "rejected"
    if case.gate.split(" ")[0] != case.expected["gate"]:
        case.failures.append(f"verify --arch {cfg['gate']}: {case.gate}, expected {case.expected['gate']}")
    if (case.upload == "uploaded") != accept:
        case.failures.append(f"upload gate: {case.upload} although verify {case.gate}")
    if gpu is None:
        case.unchecked.append("run: no GPU")
        if case.run != "no-gpu":
            case.failures.append(f"without a GPU cuda-smoke should say so (exit 2), got {case.run_output!r}")
        return
    how = expected_run(case.resolved, gpu)
    case.expected["run"] = how
    case.expected["build"] = "fails its test" if how == "no-kernel-image" else "ok, test passed"
    if (how == "no-kernel-image") != case.rebuilt_without_test:
        case.failures.append(f"build with tests: {case.build}, expected {case.expected['build']}")
    want_run = "no-kernel-image" if how == "no-kernel-image" else "ok"
    # Without the JIT only SASS runs; the driver names a PTX-only fit "JIT disabled" or "no kernel image".
    want_jit_off = {"sass": ("ok",), "jit": ("jit-disabled", "no-kernel-image")}.get(
        how, ("no-kernel-image",)
    )
    case.expected["run_jit_off"] = " or ".join(want_jit_off)
    if case.run != want_run:
        case.failures.append(f"run: {case.run} ({case.run_output}), expected {want_run}")
    if case.run_jit_off not in want_jit_off:
        case.failures.append(
            f"run with CUDA_DISABLE_PTX_JIT=1: {case.run_jit_off} ({case.run_jit_off_output}), "
            f"expected {case.expected['run_jit_off']}"
        )


# -- report ---------------------------------------------------------------------------------------

COLUMNS = (
    ("case", lambda c: c.name),
    ("--arch", lambda c: c.arch),
    ("resolved", lambda c: c.resolved or "-"),
    (
        "build + package test",
        lambda c: f"{c.first_build} → rebuilt --no-test: {c.build}" if c.first_build else c.build,
    ),
    ("fatbin (verify)", lambda c: c.fatbin or "-"),
    ("verify --arch gate", lambda c: c.gate or "-"),
    ("upload", lambda c: c.upload or "-"),
    ("install", lambda c: f"{c.install_seconds:.1f} s" if c.package else "-"),
    ("run", lambda c: f"{c.run} ({c.run_seconds:.2f} s)" if c.run else "-"),
    ("run, PTX JIT off", lambda c: c.run_jit_off or "-"),
    ("expected", lambda c: ", ".join(f"{k}={v}" for k, v in c.expected.items())),
    ("verdict", lambda c: "FAIL" if c.failures else ("not checked" if c.unchecked else "as expected")),
)


def markdown(cases: list[Case], header: str) -> str:
    lines = [header, "", "| " + " | ".join(n for n, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for c in cases:
        lines.append("| " + " | ".join(str(f(c)).replace("|", "/") for _, f in COLUMNS) + " |")
    lines.append("")
    for c in cases:
        lines.append(f"- {c.name}: run: `{c.run_output or '-'}`; JIT off: `{c.run_jit_off_output or '-'}`")
        lines += [f"  - FAILED: {x}" for x in c.failures]
        lines += [f"  - not checked: {x}" for x in c.unchecked]
    return "\n".join(lines) + "\n"


def print_table(cases: list[Case], header: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=header, show_lines=True)
    for name, _ in COLUMNS:
        table.add_column(name, overflow="fold")
    for c in cases:
        table.add_row(*(str(f(c)) for _, f in COLUMNS))
    Console(width=220).print(table)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("gpu-proof-work"), help="channel, prefixes, logs")
    ap.add_argument("--out", type=Path, help="write gpu_proof.json and gpu_proof.md here")
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--only", action="append", default=[], help="run only this case (repeatable)")
    args = ap.parse_args(argv)
    from ruamel.yaml import YAML

    cfg = YAML(typ="safe").load(args.cases.read_text())
    cases = [Case(c["name"], str(c["arch"])) for c in cfg["cases"] if not args.only or c["name"] in args.only]
    if not cases:
        print(f"error: no case named {args.only} in {args.cases}", file=sys.stderr)
        return 2
    work = args.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    gpu, gpu_text = gpu_capability()
    native = f"{gpu[0]}.{gpu[1]}" if gpu else ""
    header = f"cuda-smoke (CUDA {cfg['cuda']}) on {gpu_text if gpu else 'no GPU: ' + gpu_text}"
    print(header, flush=True)
    started = time.perf_counter()
    for case in cases:
        print(f"case {case.name}: --arch {case.arch}", flush=True)
        run_case(case, cfg, work, gpu, native)
        check(case, cfg, gpu, native)
    seconds = time.perf_counter() - started
    header += f"; {len(cases)} cases in {seconds:.0f} s"
    print_table(cases, header)
    for c in cases:
        for x in c.failures:
            print(f"FAILED {c.name}: {x}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        doc = {"gpu": gpu_text, "capability": native or None, "seconds": round(seconds, 1)}
        doc["cases"] = [asdict(c) for c in cases]
        _write(args.out / "gpu_proof.json", json.dumps(doc, indent=1) + "\n")
        _write(args.out / "gpu_proof.md", markdown(cases, header))
    if any(c.failures for c in cases):
        return 1
    if gpu is None:
        print("no GPU: builds, verify gate and installs checked; the GPU runs were not (exit 3)")
        return 3
    return 0


if __name__ == "__main__":
    from rattler_teardown import exit_now  # scripts/: py-rattler may crash at teardown

    exit_now(main())

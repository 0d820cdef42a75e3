"""The individual preflight checks of `condapipe doctor`, each a function of (spec, machine).

Each check runs the real tool it asks about (nvcc, gcc, cmake) from the machine's PATH and
returns findings plus what the build should use because of them (MAX_JOBS, a toolkit root to
switch to, CMAKE_POLICY_VERSION_MINIMUM). Machine tables live in data/doctor.yaml, what a family needs in its
profile's `doctor:` section; CUDA facts (max gcc) come from the spec's resolved variants.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.buildspec.defaults import cudas_accepting_gcc
from condapipe.doctor.costs import disk_need
from condapipe.doctor.machine import FACTS_MAX_BYTES, Finding, Machine, doctor_data, family_needs
from condapipe.errors import CondapipeError
from condapipe.facts.compile_jobs import spec_job_gib
from condapipe.facts.families import profile
from condapipe.safe_paths import read_head

GIB = 1024**3


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cuda_homes: dict[str, str] = field(default_factory=dict)


TOOL_TIMEOUT_S = 30


def _run(argv: list[str], machine: Machine) -> str | None:
    """stdout+stderr of a tool, or None when it cannot run (missing, broken, hangs).

    The tool runs in a session of its own, and a hang stops the whole session: a wrapper script
    (nvidia-smi is often one) whose child hangs would otherwise outlive the timeout."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env={**machine.env, "PATH": machine.path},
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, err = proc.communicate(timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    except BaseException:  # Ctrl-C, SIGTERM: the tool (a stand-in that sleeps) must not outlive us
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return out + err if proc.returncode == 0 else None


def _cudas(spec: BuildSpec) -> list[str]:
    return [v.cuda for v in spec.cuda_variants if not v.is_cpu]


def _vkey(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


# ---------------------------------------------------------------- nvcc


# What each nvcc said, by the binary's identity: planning a build asks for the machine's toolkits
# (the --cuda default) and doctor checks them, and each nvcc is started once per process. A binary
# replaced or edited in place (another inode, size or mtime) is asked again.
_NVCC_SEEN: dict[tuple[str, int, int, int], str | None] = {}


def nvcc_version(nvcc: str, machine: Machine) -> str | None:
    """ "13.0" from `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    try:
        real = os.path.realpath(nvcc)
        st = os.stat(real)
    except OSError:
        return None
    key = (real, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _NVCC_SEEN:
        out = _run([nvcc, "--version"], machine)
        m = re.search(r"release (\d+\.\d+)", out or "")
        if out is None:  # a timeout or a failure is not remembered: the next ask tries again
            return None
        _NVCC_SEEN[key] = m.group(1) if m else None
    return _NVCC_SEEN[key]


def check_nvcc(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    """nvcc present and of the requested CUDA, or a /usr/local/cuda-X.Y toolkit to switch to."""
    res = CheckResult()
    cudas = _cudas(spec)
    if not cudas:
        res.findings.append(Finding("nvcc", "info", "CPU-only build: nvcc not needed"))
        return res
    nvcc = machine.which("nvcc")
    on_path = nvcc_version(nvcc, machine) if nvcc else None
    for cuda in cudas:
        if on_path == cuda:
            res.findings.append(Finding("nvcc", "ok", f"nvcc {cuda} at {nvcc}", data={"cuda": cuda}))
            continue
        root = machine.cuda_roots / f"cuda-{cuda}"
        alt = root / "bin" / "nvcc"
        alt_version = nvcc_version(str(alt), machine) if alt.is_file() else None
        seen = f"nvcc on PATH is {on_path} ({nvcc})" if nvcc else "no nvcc on PATH"
        if alt_version == cuda:
            res.cuda_homes[cuda] = str(root)
            res.findings.append(
                Finding(
                    "nvcc",
                    "warn",
                    f"CUDA {cuda} requested, {seen}; the build switches to the toolkit in {root}",
                    fix=f"nothing to do; to use it yourself: export CUDA_HOME={root} PATH={root}/bin:$PATH",
                    data={"cuda": cuda, "toolkit": str(root)},
                )
            )
            continue
        res.findings.append(
            Finding(
                "nvcc",
                "block",
                f"CUDA {cuda} requested but {seen} and there is no {root}",
                fix=(
                    f"install the CUDA {cuda} toolkit (runfile: --toolkit --silent "
                    f"--installpath={root}; or apt install cuda-toolkit-{cuda.replace('.', '-')}), "
                    f"or request the CUDA you have with --cuda {on_path}"
                    if on_path
                    else f"install the CUDA {cuda} toolkit into {root} and put {root}/bin on PATH"
                ),
                data={"cuda": cuda, "nvcc": nvcc, "nvcc_version": on_path},
            )
        )
    return res


# ---------------------------------------------------------------- gcc


def gcc_version(gcc: str, machine: Machine) -> str | None:
    out = _run([gcc, "-dumpfullversion", "-dumpversion"], machine)
    m = re.search(r"(\d+(?:\.\d+)*)", out or "")
    return m.group(1) if m else None


def _older_gccs(machine: Machine, limit: int) -> list[str]:
    """gcc-N binaries on PATH that nvcc would accept, newest first."""
    found = []
    for n in range(limit, 4, -1):
        path = machine.which(f"gcc-{n}")
        if path:
            found.append(path)
    return found


def _apt_has(machine: Machine, package: str) -> bool | None:
    """Whether this machine's apt sources offer `package`; None where there is no apt-cache."""
    if not machine.which("apt-cache"):
        return None
    out = _run(["apt-cache", "show", "--no-all-versions", package], machine)
    return bool(out and out.strip())


def _older_gcc_fix(machine: Machine, limit: int, major: int) -> str:
    """How to get a gcc nvcc accepts, true on this machine: apt's gcc-N only where apt has it
    (Debian 12 has no gcc-9), else a CUDA whose nvcc accepts this gcc, or conda-forge's gcc."""
    export = f"export CC=gcc-{limit} CXX=g++-{limit} NVCC_CCBIN=g++-{limit}"
    has = _apt_has(machine, f"gcc-{limit}")
    if has:
        return f"sudo apt-get install gcc-{limit} g++-{limit}, then {export}"
    fits = cudas_accepting_gcc(major)
    conda = (
        f"gcc {limit} from conda-forge (`gcc_linux-64={limit} gxx_linux-64={limit}`) with CC, CXX and "
        "NVCC_CCBIN exported to it"
    )
    where = "this system's apt sources have no" if has is False else "install a"
    alternatives = [f"--cuda {fits[0]} or newer (nvcc accepts gcc {major})"] if fits else []
    return f"{where} gcc-{limit}: " + " or ".join([*alternatives, conda])


def check_gcc(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    """The host compiler nvcc will call must not be newer than its host_config.h accepts."""
    res = CheckResult()
    cc = machine.env.get("NVCC_CCBIN") or machine.env.get("CC") or "gcc"
    gcc = machine.which(cc) if "/" not in cc else (cc if Path(cc).is_file() else None)
    version = gcc_version(gcc, machine) if gcc else None
    if not gcc or not version:
        res.findings.append(
            Finding(
                "gcc",
                "block",
                f"no working C compiler ({cc}) on PATH",
                fix="apt install gcc g++ (build-essential)",
            )
        )
        return res
    major = int(version.split(".")[0])
    cudas = _cudas(spec)
    limits = {v.cuda: v.max_gcc for v in spec.cuda_variants if not v.is_cpu and v.max_gcc is not None}
    too_new = {c: m for c, m in limits.items() if major > m}
    if not too_new:
        verb = "accepts" if len(cudas) == 1 else "accept"
        accepted = f" (nvcc {', '.join(cudas)} {verb} up to gcc {min(limits.values())})" if limits else ""
        res.findings.append(Finding("gcc", "ok", f"gcc {version} at {gcc}{accepted}", data={"gcc": version}))
        return res
    for cuda, limit in too_new.items():
        older = _older_gccs(machine, limit)
        if older:
            gxx = older[0].replace("gcc-", "g++-")
            fix = f"export CC={older[0]} CXX={gxx} NVCC_CCBIN={gxx} (found on PATH)"
        else:
            fix = _older_gcc_fix(machine, limit, major)
        res.findings.append(
            Finding(
                "gcc",
                "block",
                f"gcc {version} is newer than CUDA {cuda}'s nvcc accepts (gcc <= {limit}): "
                "nvcc stops with 'unsupported GNU version'",
                fix=fix,
                data={"gcc": version, "cuda": cuda, "max_gcc": limit},
            )
        )
    return res


# ---------------------------------------------------------------- driver


def driver_version(machine: Machine) -> str | None:
    """The loaded kernel module's version, from /proc/driver/nvidia/version (or nvidia-smi)."""
    raw = read_head(machine.driver_file, FACTS_MAX_BYTES)  # bounded: the path may come from the env
    text = raw.decode("utf-8", errors="replace") if raw is not None else ""
    m = re.search(r"Kernel Module(?: for [^ ]+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    if m:
        return m.group(1)
    smi = machine.which("nvidia-smi")
    out = _run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], machine) if smi else None
    return out.strip().splitlines()[0] if out and out.strip() else None


def check_driver(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    """Whether the built package's CUDA code can run here (building itself needs no GPU)."""
    res = CheckResult()
    cudas = _cudas(spec)
    if not cudas:
        return res
    found = driver_version(machine)
    if not found:
        res.findings.append(
            Finding(
                "driver",
                "info",
                "no NVIDIA driver: packages build fine (nvcc needs no GPU); GPU tests of them are skipped",
            )
        )
        return res
    table = doctor_data()
    for cuda in cudas:
        full = table["driver"].get(cuda)
        compat = table["minor_compat"].get(cuda.split(".")[0])
        if full and _vkey(found) >= _vkey(full):
            res.findings.append(Finding("driver", "ok", f"driver {found} runs CUDA {cuda} (needs {full})"))
        elif compat and _vkey(found) >= _vkey(compat):
            res.findings.append(
                Finding(
                    "driver",
                    "info",
                    f"driver {found} runs CUDA {cuda} through minor version compatibility "
                    f"(>= {compat}); PTX newer than the driver cannot be JIT-compiled",
                )
            )
        else:
            need = full or compat
            res.findings.append(
                Finding(
                    "driver",
                    "warn",
                    f"driver {found} is older than CUDA {cuda} needs (>= {need}): the package builds, but "
                    "its CUDA code will fail with 'driver version is insufficient', or with Error 804 "
                    "'forward compatibility was attempted on non supported HW' when the cuda-compat "
                    "libraries are used on a GPU without forward-compatibility support (GeForce/RTX)",
                    fix=(
                        f"upgrade the NVIDIA driver to >= {need} and reboot (a kernel module older than "
                        "the user-space driver also gives Error 804); forward compatibility via the "
                        "cuda-compat package works only on data-center GPUs"
                    ),
                    data={"driver": found, "cuda": cuda, "needs": need},
                )
            )
    return res


# ---------------------------------------------------------------- memory → MAX_JOBS


def mem_available_gib(meminfo: Path) -> float | None:
    raw = read_head(meminfo, FACTS_MAX_BYTES)  # bounded: the path may come from $CONDAPIPE_MEMINFO
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace")
    fields = dict(re.findall(r"^(\w+):\s+(\d+) kB", text, re.MULTILINE))
    kib = fields.get("MemAvailable") or fields.get("MemTotal")
    return int(kib) / (1024 * 1024) if kib else None


def _gib_per_job(spec: BuildSpec) -> float:
    """The family's measured memory per compile job for the variants this spec builds."""
    return spec_job_gib(spec.package, spec.version, (not v.is_cpu for v in spec.cuda_variants))


def check_ram(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    """RAM and cores → the MAX_JOBS the build will use: one job a core, as many as the available
    memory holds at the family's measured figure per job (parallel nvcc jobs are what runs out of
    memory); no fixed cap, so a big machine is used whole."""
    res = CheckResult()
    needs = family_needs(spec.package)
    gib = mem_available_gib(machine.meminfo)
    per_job = _gib_per_job(spec)
    if gib is None:
        res.findings.append(
            Finding("ram", "warn", f"cannot read {machine.meminfo}", fix="set MAX_JOBS yourself", data={})
        )
        return res
    by_ram = math.floor(gib / per_job)
    max_jobs = max(1, min(machine.cpu_count, by_ram))
    user = machine.env.get("MAX_JOBS")
    data = {"ram_gib": round(gib, 1), "gib_per_job": per_job, "max_jobs": max_jobs}
    minimum = max(needs.min_ram_gib, per_job)  # one compile job must fit
    if gib < minimum:
        res.findings.append(
            Finding(
                "ram",
                "block",
                f"{gib:.1f} GiB of memory available; a {spec.package} build needs at least "
                f"{minimum:g} GiB even with MAX_JOBS=1 (the OOM killer ends it hours in)",
                fix=f"free memory, add swap, or build on a machine with >= {minimum:g} GiB",
                data=data,
            )
        )
    if user and user.isdigit():
        jobs = int(user)
        if jobs > max(by_ram, 1):
            res.findings.append(
                Finding(
                    "ram",
                    "warn",
                    f"MAX_JOBS={jobs} from your environment is more than {gib:.1f} GiB supports "
                    f"({per_job:g} GiB per job -> {max(by_ram, 1)})",
                    fix=f"unset MAX_JOBS (condapipe picks {max_jobs}) or lower it",
                    data={**data, "max_jobs": jobs},
                )
            )
        res.env["MAX_JOBS"] = str(jobs)
        return res
    res.env["MAX_JOBS"] = str(max_jobs)
    if not any(f.level == "block" for f in res.findings):
        res.findings.append(
            Finding(
                "ram",
                "ok",
                f"{gib:.1f} GiB available, {machine.cpu_count} CPUs -> MAX_JOBS={max_jobs} "
                f"({per_job:g} GiB per compile job of a {spec.package} "
                f"{'CUDA' if any(not v.is_cpu for v in spec.cuda_variants) else 'CPU'} build)",
                data=data,
            )
        )
    return res


# ---------------------------------------------------------------- destinations


# Kernel file systems that hold no user files: /proc, /sys, /dev and their kin. os.access says root may
# write there; creating a folder fails with a raw errno hours later, so they are refused up front.
PSEUDO_FILESYSTEMS = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "securityfs",
        "debugfs",
        "tracefs",
        "configfs",
        "pstore",
        "bpf",
        "mqueue",
        "fusectl",
        "efivarfs",
        "binfmt_misc",
        "autofs",
        "rpc_pipefs",
        "nsfs",
    }
)
MOUNTS_FILE = Path("/proc/self/mounts")


def _pseudo_filesystem(folder: Path) -> str | None:
    """The pseudo file system type `folder` (an existing folder) is on, e.g. "proc", or None."""
    try:
        mounts = MOUNTS_FILE.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    real = str(folder.resolve())
    best, kind = "", ""
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind if kind in PSEUDO_FILESYSTEMS else None


def destination_problem(path: Path) -> tuple[str, str] | None:
    """Why condapipe could not create or write into the folder `path` (what, fix), or None.

    Looked up without writing anything: the folder or its nearest existing parent must be a folder
    this user may create files in, on a file system mounted read-write."""
    target = path.absolute()
    if target.exists() and not target.is_dir():
        return f"{target} is a file, not a folder", "remove or rename that file, or choose another folder"
    existing = _existing_parent(target)
    if not existing.is_dir():
        return (
            f"{target}: {existing} is a file, not a folder",
            f"rename {existing}, or choose another folder",
        )
    pseudo = _pseudo_filesystem(existing)
    if pseudo:
        return (
            f"{target} is on {pseudo}, a kernel file system that holds no files (even root cannot write one)",
            "choose a folder on a disk",
        )
    if os.access(existing, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        return f"{existing} is on a read-only file system", "choose a folder on a writable disk"
    return (
        f"{existing} is not writable by this user",
        f"make it writable (chown/chmod u+w {existing}), or choose another folder",
    )


def check_destinations(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    """The work dir and the output channel must be writable: found now, not after hours of compiling."""
    res = CheckResult()
    folders = [("--work-dir", machine.work_dir)]
    if machine.output_dir is not None:
        folders.append(("--output-dir", machine.output_dir))
    for flag, folder in folders:
        problem = destination_problem(folder)
        if problem is None:
            res.findings.append(Finding("destinations", "ok", f"{flag} {folder.absolute()} is writable"))
        else:
            what, fix = problem
            res.findings.append(
                # --force cannot write a folder that cannot be written: never "--force builds anyway"
                Finding(
                    "destinations",
                    "block",
                    f"{flag}: {what}",
                    fix=f"{fix} (pass {flag} DIR)",
                    forceable=False,
                )
            )
    return res


# ---------------------------------------------------------------- disk


def _existing_parent(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(spec: BuildSpec, machine: Machine, *, variants: int | None = None, **_: object) -> CheckResult:
    """Free space where the work dir is, against the measured estimate (condapipe.doctor.costs):
    the first variant's build tree, then only what each further variant adds."""
    res = CheckResult()
    estimate = disk_need(spec, family_needs(spec.package))
    need = estimate.total_gib
    if variants is not None:  # only some variants still need building (a resumed plan)
        need = estimate.first_gib + estimate.extra_gib * max(0, variants - 1) / max(1, estimate.variants - 1)
    where = _existing_parent(machine.work_dir)
    free = shutil.disk_usage(where).free / GIB
    data = {
        "free_gib": round(free, 1),
        "need_gib": round(need, 1),
        "first_variant_gib": round(estimate.first_gib, 1),
        "path": str(where),
    }
    more = estimate.variants - 1
    parts = (
        f"{estimate.first_gib:.1f} for the first variant + {estimate.extra_gib:.1f} for {more} more"
        if more
        else "one variant"
    )
    if free < need:
        res.findings.append(
            Finding(
                "disk",
                "block",
                f"{free:.1f} GiB free at {where}; building {spec.package} needs about "
                f"{need:.1f} GiB ({parts})",
                fix=f"free {need - free:.1f} GiB there, or pass --work-dir on a larger disk",
                data=data,
            )
        )
    else:
        res.findings.append(
            Finding(
                "disk",
                "ok",
                f"{free:.1f} GiB free at {where} (about {need:.1f} GiB needed: {parts})",
                data=data,
            )
        )
    return res


# ---------------------------------------------------------------- cuDNN


def cudnn_header_version(header: Path) -> str | None:
    try:
        text = header.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define CUDNN_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
    if not all(parts):
        return None
    return ".".join(m.group(1) for m in parts if m)


def find_cudnn(machine: Machine, toolkit_roots: list[Path]) -> list[dict[str, str]]:
    """Every cuDNN found: system dirs, toolkits, CUDNN_* env vars, and the nvidia-cudnn pip wheel."""
    data = doctor_data()
    candidates: list[tuple[str, Path, Path]] = []
    env_inc, env_lib = machine.env.get("CUDNN_INCLUDE_DIR"), machine.env.get("CUDNN_LIB_DIR")
    if env_inc:
        candidates.append(("CUDNN_INCLUDE_DIR", Path(env_inc), Path(env_lib or env_inc)))
    for root in toolkit_roots:
        candidates.append((f"toolkit {root}", root / "include", root / "lib64"))
    for inc in data["cudnn_include_dirs"]:
        for lib in data["cudnn_lib_dirs"]:
            candidates.append(("system", Path(inc), Path(lib)))
    try:
        spec = importlib.util.find_spec("nvidia.cudnn")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        candidates.append(("pip wheel nvidia-cudnn", Path(loc) / "include", Path(loc) / "lib"))
    found, seen = [], set()
    for origin, inc, lib in candidates:
        version = cudnn_header_version(inc / "cudnn_version.h") or cudnn_header_version(inc / "cudnn.h")
        libs = sorted(lib.glob("libcudnn.so*")) if lib.is_dir() else []
        if version and libs and (inc, lib) not in seen:
            seen.add((inc, lib))
            found.append({"origin": origin, "version": version, "include": str(inc), "lib": str(lib)})
    return found


def cudnn_wheel(cuda: str, cudnn_major: str) -> str | None:
    """The pip requirement of a cuDNN wheel for this CUDA and cuDNN major, or None when PyPI has none
    (doctor.yaml cudnn_wheels: e.g. nothing for CUDA 10, no cuDNN 8 for CUDA 13)."""
    entry = (doctor_data().get("cudnn_wheels") or {}).get(cuda.split(".")[0])
    if not entry or cudnn_major not in entry["cudnn_majors"]:
        return None
    return f"{entry['package']}=={cudnn_major}.*"


def check_cudnn(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    res = CheckResult()
    family = profile(spec.package)
    if not family.rules.cudnn:
        return res
    against = family.facts.get("built_against")
    if against:  # the cuDNN comes with the build it is built against, a host package
        res.findings.append(
            Finding("cudnn", "ok", f"cuDNN: the one of the {against} build {spec.package} is built against")
        )
        return res
    for variant in spec.cuda_variants:
        if variant.is_cpu or not variant.cudnn:
            continue
        if variant.host_libraries:  # the recipe's libcudnn-dev host package, not the machine's
            res.findings.append(
                Finding("cudnn", "ok", f"cuDNN {variant.cudnn.split('.')[0]}.x: a host package of the recipe")
            )
            continue
        roots = [
            Path(p)
            for p in {str(machine.cuda_roots / f"cuda-{variant.cuda}"), str(machine.cuda_roots / "cuda")}
        ]
        found = find_cudnn(machine, roots)
        want = variant.cudnn.split(".")[0]
        match = next((f for f in found if f["version"].split(".")[0] == want), None)
        wheel = cudnn_wheel(variant.cuda, want)
        if match:
            res.env.setdefault("CUDNN_INCLUDE_DIR", match["include"])
            res.env.setdefault("CUDNN_LIB_DIR", match["lib"])
            res.findings.append(
                Finding(
                    "cudnn", "ok", f"cuDNN {match['version']} ({match['origin']}: {match['lib']})", data=match
                )
            )
        elif found:
            have = ", ".join(f"{f['version']} ({f['origin']})" for f in found)
            res.findings.append(
                Finding(
                    "cudnn",
                    "block",
                    f"CUDA {variant.cuda} build wants cuDNN {variant.cudnn} (major {want}); found {have}",
                    fix=(
                        f"pip install '{wheel}' (condapipe finds the wheel)"
                        if wheel
                        else f"install cuDNN {variant.cudnn} from {doctor_data()['cudnn_archive']}"
                    )
                    + ", or --cudnn with one you have",
                    data={"found": found},
                )
            )
        else:
            res.findings.append(
                Finding(
                    "cudnn",
                    "block",
                    f"no cuDNN found for the CUDA {variant.cuda} build (wants {variant.cudnn})",
                    fix=(
                        f"pip install '{wheel}', apt install libcudnn{want}-dev, or set CUDNN_INCLUDE_DIR"
                        if wheel
                        else f"no pip wheel of cuDNN exists for CUDA {variant.cuda}: install cuDNN "
                        f"{variant.cudnn} for it from {doctor_data()['cudnn_archive']} and set "
                        "CUDNN_INCLUDE_DIR and CUDNN_LIB_DIR"
                    ),
                )
            )
    return res


# ---------------------------------------------------------------- CMake


def cmake_version(machine: Machine) -> tuple[str | None, str | None]:
    cmake = machine.which("cmake")
    out = _run([cmake, "--version"], machine) if cmake else None
    m = re.search(r"cmake version (\d+\.\d+(?:\.\d+)?)", out or "")
    return cmake, (m.group(1) if m else None)


def _cmake_min(spec: BuildSpec, table: tuple[tuple[str, str], ...]) -> str | None:
    for rng, minimum in table:
        try:
            if Version(spec.version) in SpecifierSet(rng):
                return minimum
        except InvalidVersion:
            return minimum
    return None


def check_cmake(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    res = CheckResult()
    needs = family_needs(spec.package)
    minimum = _cmake_min(spec, needs.cmake_min)
    cmake, version = cmake_version(machine)
    if minimum is None:
        note = f"cmake {version}" if version else "no cmake"
        res.findings.append(Finding("cmake", "info", f"{note}; {spec.package} does not use CMake"))
        return res
    if not version:
        res.findings.append(
            Finding("cmake", "block", "cmake not found on PATH", fix=f"pip install 'cmake>={minimum}'")
        )
        return res
    if _vkey(version) < _vkey(minimum):
        res.findings.append(
            Finding(
                "cmake",
                "block",
                f"cmake {version} is older than {spec.package} {spec.version} needs ({minimum})",
                fix=f"pip install 'cmake>={minimum}'",
            )
        )
        return res
    if _vkey(version)[0] >= 4 and needs.cmake4_policy:
        res.env["CMAKE_POLICY_VERSION_MINIMUM"] = "3.5"
        res.findings.append(
            Finding(
                "cmake",
                "warn",
                f"cmake {version}: CMake >= 4 rejects the cmake_minimum_required(< 3.5) in "
                f"{spec.package}'s (third-party) CMakeLists",
                fix="none needed: the build sets CMAKE_POLICY_VERSION_MINIMUM=3.5 (or pip install 'cmake<4')",
            )
        )
        return res
    res.findings.append(Finding("cmake", "ok", f"cmake {version} at {cmake} (needs >= {minimum})"))
    return res


# ---------------------------------------------------------------- engine


def check_engine(spec: BuildSpec, machine: Machine, *, engine: str = "auto", **_: object) -> CheckResult:
    from condapipe.engines import get_engine

    res = CheckResult()
    try:
        chosen = get_engine(engine)
    except CondapipeError as exc:
        res.findings.append(Finding("engine", "block", str(exc), fix="pass --engine auto"))
        return res
    if not chosen.available():
        res.findings.append(
            Finding(
                "engine",
                "block",
                f"engine {chosen.name} is not available",
                fix="conda install conda-build, or --engine rattler-build (pip install py-rattler-build)",
            )
        )
    else:
        res.findings.append(Finding("engine", "info", f"{chosen.name} will build ({engine})"))
    return res


# conda subdir each `uname -m` builds natively (condapipe's recipes do not cross-compile).
NATIVE_SUBDIR = {"x86_64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64"}


def check_platform(spec: BuildSpec, machine: Machine, **_: object) -> CheckResult:
    """The recipes compile natively: a linux-aarch64 (Jetson) build needs an aarch64 machine."""
    res = CheckResult()
    native = NATIVE_SUBDIR.get(machine.arch)
    if native == spec.platform:
        res.findings.append(Finding("platform", "ok", f"{machine.arch} machine builds {spec.platform}"))
        return res
    where = "on the Jetson board itself" if spec.jetson else f"on a {spec.platform} machine"
    res.findings.append(
        Finding(
            "platform",
            "block",
            f"this {machine.arch} machine cannot build {spec.platform} packages (no cross-compiling)",
            fix=f"run the build {where}; `condapipe render` works on any machine",
            forceable=False,
        )
    )
    return res


# Checks whose findings hold even when this machine cannot build the platform (run_doctor).
HOST_INDEPENDENT: tuple[Callable[..., CheckResult], ...] = (check_platform, check_destinations)

ALL: tuple[Callable[..., CheckResult], ...] = (
    check_platform,
    check_destinations,
    check_nvcc,
    check_gcc,
    check_driver,
    check_ram,
    check_disk,
    check_cudnn,
    check_cmake,
    check_engine,
)

"""`condapipe doctor` on faked machines: stand-in tools on PATH, a tiny /proc/meminfo, a driver file.

The stand-ins (tests/standins/doctor) are real executables that answer the version queries the
way the real tools do; doctor runs them as it runs the real ones. Everything else (the real gcc,
cmake, nvcc 13.0 of this machine) is used as it is.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from condapipe.buildspec.settings import spec_from_flags
from condapipe.cli.main import main
from condapipe.doctor.run import Machine, run_doctor
from condapipe.facts.families import profile

STANDINS = Path(__file__).parent.parent / "standins" / "doctor"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
needs_nvcc13 = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs the real nvcc on PATH")


def doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    result = CliRunner().invoke(main, ["doctor", *args, "--json"], env=env or {})
    data = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.exit_code, data, result.stderr


def finding(data: dict, check: str, level: str | None = None) -> dict:
    found = [f for f in data["findings"] if f["check"] == check and (level is None or f["level"] == level)]
    assert found, f"no {check}/{level} finding in {json.dumps(data['findings'], indent=1)}"
    return found[0]


def machine(tmp_path: Path, path: str = SYSTEM_PATH, **env: str) -> Machine:
    return Machine(
        path=path,
        meminfo=Path(env.pop("meminfo", "/proc/meminfo")),
        driver_file=tmp_path / "no-driver",
        cuda_roots=tmp_path / "no-toolkits",
        cpu_count=8,
        work_dir=tmp_path / "work",
        env={"PATH": path, **env},
    )


def meminfo(tmp_path: Path, available_kib: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {available_kib * 2} kB\nMemAvailable:   {available_kib} kB\n")
    return path


def test_every_warning_or_blocking_finding_says_how_to_fix_it(tmp_path: Path) -> None:
    path = f"{STANDINS / 'nvcc-11.0'}:{STANDINS / 'gcc-14'}:{STANDINS / 'cmake-4'}:{SYSTEM_PATH}"
    env = {"PATH": path, "CONDAPIPE_CUDA_ROOTS": str(tmp_path)}
    code, data, _ = doctor("magma", "--cuda", "12.0", env=env)
    assert code == 3
    problems = [f for f in data["findings"] if f["level"] in ("warn", "block")]
    assert problems and all(f["fix"] for f in problems)


def test_an_nvcc_of_another_cuda_on_path_blocks_with_exit_3(tmp_path: Path) -> None:
    env = {"PATH": f"{STANDINS / 'nvcc-11.0'}:{SYSTEM_PATH}", "CONDAPIPE_CUDA_ROOTS": str(tmp_path)}
    code, data, err = doctor("cuda-smoke", "--cuda", "13.0", "--arch", "9.0", env=env)
    assert code == 3
    nvcc = finding(data, "nvcc", "block")
    assert "CUDA 13.0 requested but nvcc on PATH is 11.0" in nvcc["message"]
    assert "--cuda 11.0" in nvcc["fix"] and "13.0 toolkit" in nvcc["fix"]
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_a_matching_toolkit_under_usr_local_is_switched_to_instead_of_blocking(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda-11.0" / "bin"
    toolkit.mkdir(parents=True)
    shutil.copy(STANDINS / "nvcc-11.0" / "nvcc", toolkit / "nvcc")
    report = run_doctor(
        spec_from_flags("cuda-smoke", {"cuda": ("11.0",), "arch": "8.0"}),
        Machine(path=SYSTEM_PATH, cuda_roots=tmp_path, work_dir=tmp_path, env={}),
    )
    nvcc = next(f for f in report.findings if f.check == "nvcc")
    assert nvcc.level == "warn" and "switches to the toolkit" in nvcc.message
    assert dict(report.cuda_homes) == {"11.0": str(tmp_path / "cuda-11.0")}


@needs_nvcc13
def test_the_real_toolchain_of_this_machine_passes_for_cuda_13(tmp_path: Path) -> None:
    code, data, _ = doctor("cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--work-dir", str(tmp_path))
    assert code == 0, data
    assert finding(data, "nvcc")["level"] == "ok"
    assert finding(data, "gcc")["level"] == "ok"
    assert data["build_env"]["MAX_JOBS"].isdigit()


def test_a_too_new_gcc_blocks_and_names_the_newest_one_nvcc_accepts(tmp_path: Path) -> None:
    path = f"{STANDINS / 'nvcc-11.0'}:{STANDINS / 'gcc-14'}:{SYSTEM_PATH}"
    report = run_doctor(
        spec_from_flags("cuda-smoke", {"cuda": ("11.0",), "arch": "8.0"}), machine(tmp_path, path)
    )
    gcc = next(f for f in report.findings if f.check == "gcc")
    assert gcc.level == "block"
    assert "gcc 14.2.0 is newer than CUDA 11.0's nvcc accepts (gcc <= 9)" in gcc.message
    assert "gcc-9" in gcc.fix and "NVCC_CCBIN" in gcc.fix


def test_an_older_gcc_already_on_path_is_suggested_by_its_path(tmp_path: Path) -> None:
    older = tmp_path / "bin"
    older.mkdir()
    shutil.copy(STANDINS / "gcc-14" / "gcc", older / "gcc-9")
    path = f"{STANDINS / 'nvcc-11.0'}:{STANDINS / 'gcc-14'}:{older}:{SYSTEM_PATH}"
    report = run_doctor(
        spec_from_flags("cuda-smoke", {"cuda": ("11.0",), "arch": "8.0"}), machine(tmp_path, path)
    )
    gcc = next(f for f in report.findings if f.check == "gcc")
    assert f"CC={older / 'gcc-9'}" in gcc.fix


def test_a_tiny_ram_blocks_the_build_and_explains_the_oom(tmp_path: Path) -> None:
    env = {"CONDAPIPE_MEMINFO": str(meminfo(tmp_path, 512 * 1024))}  # 0.5 GiB available
    code, data, _ = doctor("cuda-smoke", "--cuda", "13.0", "--arch", "9.0", env=env)
    assert code == 3
    ram = finding(data, "ram", "block")
    assert ram["ram_gib"] == 0.5 and "OOM" in ram["message"]


@pytest.mark.parametrize(("gib", "expected"), [(3, 3), (64, 8), (1.5, 1)])
def test_max_jobs_follows_ram_per_job_and_the_cores(tmp_path: Path, gib: float, expected: int) -> None:
    # cuda-smoke: 1 GiB per job; the faked machine has 8 CPUs, and no other cap applies.
    m = machine(tmp_path, meminfo=str(meminfo(tmp_path, int(gib * 1024 * 1024))))
    report = run_doctor(spec_from_flags("cuda-smoke", {"cuda": ("13.0",), "arch": "9.0"}), m)
    assert report.max_jobs == expected


def test_pytorch_max_jobs_uses_the_memory_per_job_of_its_variant_kind(tmp_path: Path) -> None:
    from condapipe.facts.compile_jobs import compile_job_gib

    per_job = int(compile_job_gib("pytorch", "2.4.1", cuda=False))  # a CPU translation unit's figure
    spec = spec_from_flags("pytorch", {"version": "2.4.1", "cuda": ("cpu",), "python": ("3.11",)})
    roomy = run_doctor(spec, machine(tmp_path, meminfo=str(meminfo(tmp_path, 5 * per_job * 1024 * 1024))))
    assert roomy.max_jobs == 5 and not [f for f in roomy.blocking if f.check == "ram"]
    small = run_doctor(spec, machine(tmp_path, meminfo=str(meminfo(tmp_path, (per_job - 1) * 1024 * 1024))))
    # the disk finding depends on this machine's free space, not on the memory asked about here
    assert [f.check for f in small.blocking if f.check != "disk"] == ["ram"]
    floor = max(per_job, profile("pytorch").doctor.min_ram_gib)  # the profile's `doctor:` section
    assert f"needs at least {floor:g}" in next(f for f in small.blocking if f.check == "ram").message


def test_a_user_max_jobs_beyond_the_ram_is_kept_but_warned_about(tmp_path: Path) -> None:
    m = machine(tmp_path, meminfo=str(meminfo(tmp_path, 2 * 1024 * 1024)), MAX_JOBS="16")
    report = run_doctor(spec_from_flags("cuda-smoke", {"cuda": ("13.0",), "arch": "9.0"}), m)
    assert report.max_jobs == 16
    warn = next(f for f in report.findings if f.check == "ram" and f.level == "warn")
    assert "MAX_JOBS=16" in warn.message and "unset MAX_JOBS" in warn.fix


def _driver_file(tmp_path: Path, version: str) -> Path:
    path = tmp_path / "nvidia-version"
    path.write_text(
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Thu Jun  5 2025\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    return path


@pytest.mark.parametrize(
    "line",
    [
        # the proprietary module, and the open one (as read on an H100 with driver 580.159.04)
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Jun  5 2025",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  ",
    ],
)
def test_the_driver_version_is_read_from_both_kernel_module_flavours(tmp_path: Path, line: str) -> None:
    from condapipe.doctor.checks import driver_version

    path = tmp_path / "version"
    path.write_text(line + "\nGCC version:  gcc version 15.3.0 (GCC) \n")
    assert driver_version(Machine(path=SYSTEM_PATH, driver_file=path)) == "580.159.04"


def test_an_old_driver_is_explained_with_error_804_and_forward_compatibility(tmp_path: Path) -> None:
    env = {"CONDAPIPE_DRIVER_VERSION_FILE": str(_driver_file(tmp_path, "450.36.06"))}
    _, data, _ = doctor("cuda-smoke", "--cuda", "13.0", "--arch", "9.0", env=env)
    driver = finding(data, "driver", "warn")
    assert "Error 804" in driver["message"] and "forward compatibility" in driver["message"]
    assert ">= 580.65.06" in driver["fix"] and "data-center" in driver["fix"]
    assert driver["level"] != "block"  # building needs no GPU: an old driver does not stop the build


def test_a_driver_of_the_same_major_runs_newer_minors_through_minor_version_compat(tmp_path: Path) -> None:
    m = Machine(path=SYSTEM_PATH, driver_file=_driver_file(tmp_path, "535.183.01"), work_dir=tmp_path, env={})
    report = run_doctor(spec_from_flags("cuda-smoke", {"cuda": ("12.8",), "arch": "9.0"}), m)
    driver = next(f for f in report.findings if f.check == "driver")
    assert driver.level == "info" and "minor version compatibility" in driver.message


def _cudnn(tmp_path: Path, major: int) -> tuple[Path, Path]:
    inc, lib = tmp_path / f"cudnn{major}" / "include", tmp_path / f"cudnn{major}" / "lib"
    inc.mkdir(parents=True)
    lib.mkdir()
    (inc / "cudnn_version.h").write_text(
        f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR 0\n#define CUDNN_PATCHLEVEL 5\n"
    )
    (lib / f"libcudnn.so.{major}").write_bytes(b"\x7fELF")
    return inc, lib


def test_cudnn_is_found_through_cudnn_include_dir_and_passed_to_the_build(tmp_path: Path) -> None:
    inc, lib = _cudnn(tmp_path, 8)
    spec = spec_from_flags("pytorch", {"version": "1.8.0", "cuda": ("11.1",), "python": ("3.8",)})
    report = run_doctor(spec, machine(tmp_path, CUDNN_INCLUDE_DIR=str(inc), CUDNN_LIB_DIR=str(lib)))
    cudnn = next(f for f in report.findings if f.check == "cudnn")
    assert cudnn.level == "ok" and "8.0.5" in cudnn.message
    assert dict(report.build_env)["CUDNN_INCLUDE_DIR"] == str(inc)


def test_a_cudnn_of_another_major_blocks_and_names_the_wheel_to_install(tmp_path: Path) -> None:
    inc, lib = _cudnn(tmp_path, 9)
    spec = spec_from_flags("pytorch", {"version": "1.8.0", "cuda": ("11.1",), "python": ("3.8",)})
    report = run_doctor(spec, machine(tmp_path, CUDNN_INCLUDE_DIR=str(inc), CUDNN_LIB_DIR=str(lib)))
    cudnn = next(f for f in report.findings if f.check == "cudnn")
    assert cudnn.level == "block" and "9.0.5" in cudnn.message
    assert "nvidia-cudnn-cu11==8.*" in cudnn.fix


def test_a_cuda_whose_libraries_are_host_packages_needs_no_cudnn_on_the_machine(tmp_path: Path) -> None:
    """From CUDA 13.0 the recipe's libcudnn-dev host package brings cuDNN (cuda.yaml host_libraries):
    a machine without one builds it all the same."""
    spec = spec_from_flags("pytorch", {"version": "2.9.0", "cuda": ("13.0",), "python": ("3.12",)})
    m = machine(tmp_path, CUDNN_INCLUDE_DIR=str(tmp_path / "none"))
    cudnn = next(f for f in run_doctor(spec, m).findings if f.check == "cudnn")
    assert cudnn.level == "ok" and "host package" in cudnn.message


@pytest.mark.parametrize(
    ("version", "cuda", "python", "wheel"),
    [
        ("1.8.0", "11.1", "3.8", "nvidia-cudnn-cu11==8.*"),
        ("2.4.1", "12.4", "3.11", "nvidia-cudnn-cu12==9.*"),
        ("1.9.1", "10.2", "3.9", None),  # no nvidia-cudnn-cu10 exists
    ],
)
def test_the_cudnn_wheel_suggested_is_one_that_exists_for_that_cuda(
    tmp_path: Path, version: str, cuda: str, python: str, wheel: str | None
) -> None:
    spec = spec_from_flags("pytorch", {"version": version, "cuda": (cuda,), "python": (python,)})
    m = machine(tmp_path, CUDNN_INCLUDE_DIR=str(tmp_path / "none"))
    cudnn = next(f for f in run_doctor(spec, m).findings if f.check == "cudnn")
    assert cudnn.level == "block"
    assert "nvidia-cudnn-cu10" not in cudnn.fix
    if wheel:
        assert cudnn.fix.startswith(f"pip install '{wheel}'")
    else:
        assert cudnn.fix.startswith(f"no pip wheel of cuDNN exists for CUDA {cuda}: install cuDNN")
        assert "https://developer.nvidia.com/rdp/cudnn-archive" in cudnn.fix


def test_an_output_dir_that_cannot_be_made_blocks_before_the_build(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    m = Machine(**{**machine(tmp_path).__dict__, "output_dir": tmp_path / "a-file" / "channel"})
    report = run_doctor(spec_from_flags("cuda-smoke", {"cuda": ("13.0",), "arch": "9.0"}), m)
    found = [f for f in report.findings if f.check == "destinations"]
    assert [f.level for f in found] == ["ok", "block"]
    assert (
        found[1].message
        == f"--output-dir: {tmp_path}/a-file/channel: {tmp_path}/a-file is a file, not a folder"
    )
    assert "--output-dir DIR" in found[1].fix


def test_cmake_4_on_an_old_family_sets_the_policy_minimum_for_the_build(tmp_path: Path) -> None:
    path = f"{STANDINS / 'cmake-4'}:{SYSTEM_PATH}"
    report = run_doctor(spec_from_flags("magma", {"cuda": ("13.0",)}), machine(tmp_path, path))
    cmake = next(f for f in report.findings if f.check == "cmake")
    assert cmake.level == "warn" and "4.0.3" in cmake.message
    assert dict(report.build_env)["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5"


def test_missing_cmake_blocks_a_family_that_uses_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    report = run_doctor(spec_from_flags("magma", {"cuda": ("13.0",)}), machine(tmp_path, str(empty)))
    assert {f.check for f in report.blocking} >= {"cmake", "nvcc", "gcc"}


def _disk(tmp_path: Path, **flags: object) -> dict:
    spec = spec_from_flags("pytorch", {"version": "2.4.1", **flags})
    return next(f for f in run_doctor(spec, machine(tmp_path)).findings if f.check == "disk").data


def test_a_further_python_adds_only_its_packages_and_bindings_not_a_build_tree(tmp_path: Path) -> None:
    one = _disk(tmp_path, cuda=("12.4",), python=("3.11",))
    two = _disk(tmp_path, cuda=("12.4",), python=("3.11", "3.12"))
    three = _disk(tmp_path, cuda=("12.4",), python=("3.10", "3.11", "3.12"))
    added = two["need_gib"] - two["first_variant_gib"]
    from condapipe.doctor.costs import build_costs
    from condapipe.doctor.machine import family_needs

    facts = build_costs(family_needs("pytorch").build_costs)
    tree_gib = facts["configured_tree_mib"] * facts["margin"] / 1024
    assert 0 < added < one["need_gib"] - tree_gib  # no second build tree
    assert three["need_gib"] == pytest.approx(two["need_gib"] + added, abs=0.15)
    # the machine: a second Python at 64 GiB free is not blocked
    assert two["need_gib"] < 64


def test_the_disk_need_grows_with_the_archs_compiled_and_blocks_only_when_short(tmp_path: Path) -> None:
    few = _disk(tmp_path, cuda=("12.4",), python=("3.11",), arch="9.0")
    many = _disk(tmp_path, cuda=("12.4",), python=("3.11",), arch="5.0;6.0;7.0;7.5;8.0;8.6;9.0")
    cpu = _disk(tmp_path, cuda=("cpu",), python=("3.11",))
    assert cpu["need_gib"] < few["need_gib"] < many["need_gib"]
    spec = spec_from_flags("pytorch", {"version": "2.4.1", "cuda": ("12.1", "12.4"), "python": ("3.11",)})
    disk = next(f for f in run_doctor(spec, machine(tmp_path)).findings if f.check == "disk")
    free = shutil.disk_usage(tmp_path).free / 1024**3
    assert (disk.level == "block") == (free < disk.data["need_gib"])


def test_every_measured_cost_figure_says_where_it_was_measured() -> None:
    from condapipe.doctor.costs import build_costs
    from condapipe.doctor.machine import family_needs

    facts = build_costs(family_needs("pytorch").build_costs)
    for key in ("configured_tree_mib", "objects", "python_objects", "object_kib"):
        source = facts[key.removesuffix("_mib") + "_from"] if key.endswith("_mib") else facts[f"{key}_from"]
        assert len(source.split()) > 5, key


def test_a_requested_engine_that_is_not_installed_blocks(tmp_path: Path) -> None:
    env = {"PATH": SYSTEM_PATH}
    if shutil.which("conda", path=SYSTEM_PATH):
        pytest.skip("conda is installed here")
    _, data, _ = doctor("cuda-smoke", "--cuda", "13.0", "--arch", "9.0", "--engine", "conda-build", env=env)
    assert finding(data, "engine", "block")["fix"]


def test_build_runs_doctor_first_and_stops_with_exit_3_before_writing_anything(tmp_path: Path) -> None:
    env = {"PATH": f"{STANDINS / 'nvcc-11.0'}:{SYSTEM_PATH}", "CONDAPIPE_CUDA_ROOTS": str(tmp_path)}
    out, work = tmp_path / "channel", str(tmp_path / "work")
    result = CliRunner().invoke(
        main,
        [
            "build",
            "cuda-smoke",
            "--cuda",
            "13.0",
            "--arch",
            "9.0",
            "--output-dir",
            str(out),
            "--work-dir",
            work,
        ],
        env=env,
    )
    assert result.exit_code == 3
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: preflight: CUDA 13.0 requested") and "--force" in last
    assert not out.exists() and not (tmp_path / "work" / "state.json").exists()
    assert os.environ.get("CONDAPIPE_MEMINFO") is None  # the runner's env did not leak


def test_cudnn_from_the_pip_wheel_layout_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The nvidia-cudnn-cuXX wheels install nvidia/cudnn/{include,lib} into site-packages.
    site = tmp_path / "site"
    wheel = site / "nvidia" / "cudnn"
    (wheel / "include").mkdir(parents=True)
    (wheel / "lib").mkdir()
    (wheel / "include" / "cudnn_version.h").write_text(
        "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7\n"
    )
    (wheel / "lib" / "libcudnn.so.8").write_bytes(b"\x7fELF")
    monkeypatch.syspath_prepend(str(site))
    spec = spec_from_flags("pytorch", {"version": "1.8.0", "cuda": ("11.1",), "python": ("3.8",)})
    report = run_doctor(spec, machine(tmp_path))
    cudnn = next(f for f in report.findings if f.check == "cudnn")
    assert cudnn.level == "ok" and "pip wheel nvidia-cudnn" in cudnn.message
    assert dict(report.build_env)["CUDNN_LIB_DIR"] == str(wheel / "lib")


@pytest.mark.gpu
def test_on_a_gpu_machine_the_loaded_driver_is_read_and_matches_nvidia_smi(tmp_path: Path) -> None:
    from condapipe.doctor.checks import driver_version

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    )
    assert driver_version(Machine.from_environ(tmp_path, os.environ)) == smi.stdout.strip().splitlines()[0]


def test_libtorch_is_checked_like_pytorch_for_cudnn_cmake_and_memory(tmp_path: Path) -> None:
    from condapipe.facts.compile_jobs import compile_job_gib

    spec = spec_from_flags("libtorch", {"version": "2.9.0", "cuda": ("13.0",)})
    report = run_doctor(spec, machine(tmp_path, meminfo=str(meminfo(tmp_path, 64 * 1024 * 1024))))
    checks = {f.check: f for f in report.findings}
    assert "cudnn" in checks and "needs >= 3.18" in checks["cmake"].message
    assert checks["ram"].data["gib_per_job"] == compile_job_gib("pytorch", "2.9.0", cuda=True)


def test_a_jetson_build_on_an_x86_64_machine_blocks_and_says_to_build_on_the_board() -> None:
    code, data, _ = doctor("pytorch", "--jetson", "orin", env={"CONDAPIPE_MACHINE_ARCH": "x86_64"})
    assert code == 3
    found = finding(data, "platform", "block")
    assert "cannot build linux-aarch64" in found["message"]
    assert "Jetson board" in found["fix"]


def test_an_aarch64_machine_builds_linux_aarch64_natively(tmp_path: Path) -> None:
    spec = spec_from_flags("cuda-smoke", {"cuda": ("13.0",), "arch": "8.7", "platform": "linux-aarch64"})
    aarch64 = Machine(**{**machine(tmp_path).__dict__, "arch": "aarch64"})
    report = run_doctor(spec, aarch64)
    assert [f.level for f in report.findings if f.check == "platform"] == ["ok"]


def test_a_64_core_machine_builds_pytorch_cpu_on_every_core(tmp_path: Path) -> None:
    # The lent 64-core machine: 503 GiB available. A CPU translation unit's figure, not an nvcc job's,
    # and no fixed cap: all 64 cores compile.
    m = machine(tmp_path, meminfo=str(meminfo(tmp_path, 503 * 1024 * 1024)))
    m = dataclasses.replace(m, cpu_count=64)
    spec = spec_from_flags("pytorch", {"version": "2.6.0", "cuda": ("cpu",), "python": ("3.12",)})
    assert run_doctor(spec, m).max_jobs == 64


def test_a_cuda_build_takes_fewer_jobs_than_a_cpu_build_on_the_same_memory(tmp_path: Path) -> None:
    m = dataclasses.replace(machine(tmp_path, meminfo=str(meminfo(tmp_path, 48 * 1024 * 1024))), cpu_count=64)
    flags = {"version": "2.6.0", "python": ("3.12",)}
    cpu = run_doctor(spec_from_flags("pytorch", {**flags, "cuda": ("cpu",)}), m)
    cuda = run_doctor(
        spec_from_flags("pytorch", {**flags, "cuda": ("12.4",), "arch": "9.0"}),
        dataclasses.replace(m, env={**m.env, "CONDAPIPE_MACHINE_ARCH": "x86_64"}),
    )
    assert cuda.max_jobs < cpu.max_jobs <= 64

"""conda-build engine: runs `conda build` on a v0 recipe (meta.yaml + conda_build_config.yaml).

Users who already have conda get the builder the PyTorch project itself used. The adapter is
only argv plumbing: every option of BuildOptions maps to a documented `conda build` flag, the
log is streamed and kept, and the packages are the ones the build wrote into the output folder
(one conda-build run: asking `conda build --output` first would start, render and solve twice).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import time
from functools import lru_cache
from pathlib import Path

from condapipe.engines import diagnose
from condapipe.engines.base import V0_RECIPE, BuildOptions, EngineResult, log_file_for
from condapipe.engines.logs import BuildLog, stream_process
from condapipe.errors import BuildFailed, EnvironmentProblem, UsageError

# `conda build --version` imports all of conda: 2 CPU-s, yet 26 s of wall time on a loaded 2-core
# machine, and once past the old 120 s ceiling (conda-build then read as "not installed" and auto
# picked rattler-build). A ceiling that only a hung conda reaches.
_VERSION_TIMEOUT_S = 300


@lru_cache(maxsize=8)
def _works(command: tuple[str, ...]) -> bool:
    try:
        proc = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=_VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _conda_build_commands() -> list[tuple[str, ...]]:
    """The commands that may run conda-build here, in order: `conda build`, the standalone `conda-build`."""
    conda, standalone = shutil.which("conda"), shutil.which("conda-build")
    return [*([(conda, "build")] if conda else []), *([(standalone,)] if standalone else [])]


def find_conda_build() -> tuple[str, ...] | None:
    """The command that runs conda-build: `conda build`, else the standalone `conda-build`."""
    return next((command for command in _conda_build_commands() if _works(command)), None)


# conda's and conda-build's error lines ("PackagesNotFoundError: The following packages ...",
# "CondaBuildException: ...", "Error: ..."); what follows them is help text ending in a URL.
_ERROR_LINE = re.compile(r"^(?:[A-Za-z_.]*(?:Error|Exception)|Error|ERROR|CRITICAL)\b[^:]*:\s*\S")
_TRACEBACK = "Traceback (most recent call last):"
# A build log can be hundreds of MB; its cause is at the end (conda-build stops at the first error).
LOG_TAIL_BYTES = 1 << 20


def _first_list(lines: list[str]) -> list[str]:
    """The items of the first `  - item` block (blank lines before it skipped)."""
    items: list[str] = []
    for line in lines:
        text = line.strip()
        if text.startswith("- "):
            items.append(text[2:])
        elif text or items:
            break
    return items


def _channels_searched(lines: list[str]) -> list[str]:
    """The channels listed under conda's "Current channels:", one per channel (not per subdir)."""
    for i, line in enumerate(lines):
        if line.strip() == "Current channels:":
            roots = [re.sub(r"/(?:noarch|[a-z]+-[a-z0-9_]+)/?$", "", c) for c in _first_list(lines[i + 1 :])]
            return list(dict.fromkeys(roots))
    return []


def _cause_at(lines: list[str], i: int) -> str:
    """Error line `i` as the user reads it; a PackagesNotFoundError also names the missing packages
    listed below it and the channels that were searched."""
    line = re.sub(r"^(?:[a-z_]+\.)+(?=[A-Z])", "", lines[i].strip())  # conda.exceptions.X -> X
    if "not available from current channels" in line:
        missing = _first_list(lines[i + 1 :])
        if missing:
            line = f"{line} {', '.join(missing)}"
            channels = _channels_searched(lines[i + 1 :])
            if channels:
                line += f" (channels searched: {', '.join(channels)})"
    return line


def error_line(stderr: str | None, stdout: str | None) -> str:
    """The line that names what went wrong. conda-build logs warnings and a retry summary ("ERROR:
    Failed to get package records, max retries exceeded.") before the traceback of what it retried,
    so the cause is the exception that ends the last traceback; without one, the last error line
    (conda-build stops at its first error: "BuildScriptException: Command ... returned non-zero exit
    status 1." ends a failed build script); stderr before stdout; else the last non-empty line."""
    for text in (stderr or "", stdout or ""):
        lines = [line.rstrip() for line in text.splitlines()]
        starts = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK]
        if starts:
            for i in range(starts[-1] + 1, len(lines)):
                if not lines[i][:1].isspace() and _ERROR_LINE.match(lines[i].strip()):
                    return _cause_at(lines, i)
    for text in (stderr or "", stdout or ""):
        lines = [line.rstrip() for line in text.splitlines()]
        found = [i for i, line in enumerate(lines) if _ERROR_LINE.match(line.strip())]
        if found:
            return _cause_at(lines, found[-1])
    for text in (stderr or "", stdout or ""):
        tail = [line.strip() for line in text.splitlines() if line.strip()]
        if tail:
            return tail[-1]
    return "no output"


_MISSING = re.compile(
    r"not available from current channels|Unsatisfiable dependencies|No candidates were found"
)


def with_channels(cause: str, options: BuildOptions) -> str:
    """A cause naming missing packages also names where they were looked for (conda's list when it
    printed one, else the channels condapipe passed)."""
    if not _MISSING.search(cause) or "channels searched:" in cause:
        return cause
    return f"{cause} (channels searched: {', '.join(options.all_channels())})"


def log_error_line(log_path: Path) -> str:
    """`error_line` of a build log, read from its last MiB only."""
    with log_path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
        return error_line(fh.read().decode("utf-8", errors="replace"), None)


def python_variant_file(options: BuildOptions) -> Path:
    """Where several --python values are written as a variant file (`python: [...]`): conda-build's
    own `--python` takes one version (given twice it crashes in variants.get_default_variant with
    "unhashable type: 'list'"), and a list under --variants builds only the last one."""
    return (options.work_dir / "conda-build-python.yaml").resolve()


def write_python_variants(path: Path, pythons: tuple[str, ...]) -> None:
    """The variant file of several --python values (temp name, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("python:\n" + "".join(f'  - "{p}"\n' for p in pythons))
    tmp.replace(path)


def _package_files(output_dir: Path, package_format: str) -> dict[Path, tuple[int, int, int]]:
    """The packages in the output folder's subdir folders, each with (mtime_ns, size, inode): what
    a build wrote is what is new or changed afterwards. Read from the folder rather than asked of
    `conda build --output` (a second conda-build start that renders and solves again, seconds on a
    small recipe); an output with its own `target:` lands under its target's subdir, found here too.
    """
    found: dict[Path, tuple[int, int, int]] = {}
    for path in output_dir.glob(f"*/*.{package_format}"):
        st = path.lstat()
        if stat.S_ISREG(st.st_mode):
            found[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return found


# conda-build's interpreter reads this folder's sitecustomize: its compression threads (below).
THREADS_SITE = Path(__file__).with_name("conda_build_site")


def build_environment(options: BuildOptions) -> dict[str, str]:
    """The environment `conda build` runs in: condapipe's, the build's extra variables and, for a
    `.conda`, the compression threads (conda-build has no option: conda-package-handling reads a
    module constant, set by THREADS_SITE's sitecustomize from CONDAPIPE_ZSTD_THREADS). The engine's
    process boundary: the one place this stage reads os.environ, to hand it on."""
    env = {**os.environ, **dict(options.env)}
    if options.package_format == "conda" and options.compression_threads:
        env["CONDAPIPE_ZSTD_THREADS"] = str(options.compression_threads)
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(THREADS_SITE) + (os.pathsep + rest if rest else "")
    return env


class CondaBuildEngine:
    """Builds `meta.yaml` recipes with `conda build`."""

    name = "conda-build"
    recipe_file = V0_RECIPE

    def available(self) -> bool:
        return find_conda_build() is not None

    def argv(self, command: tuple[str, ...], recipe_dir: Path, options: BuildOptions) -> list[str]:
        """The exact `conda build` command line for this recipe and these options."""
        if options.package_format == "tar.bz2" and options.compression_level is not None:
            raise UsageError("conda-build has no bzip2 compression level option; drop --compression-level")
        args = [*command, str(recipe_dir)]
        args += ["--output-folder", str(options.output_dir.resolve())]
        for channel in options.all_channels():
            args += ["-c", channel]
        if options.override_channels:
            args.append("--override-channels")
        for python in options.pythons:
            if not re.fullmatch(r"\d+\.\d+(?:\.\d+)?", python):
                raise UsageError(f"--python {python!r}: give a version such as 3.11")
        if len(options.pythons) == 1:
            args += ["--python", options.pythons[0]]
        variant_file = recipe_dir / "conda_build_config.yaml"
        if variant_file.exists():
            args += ["-m", str(variant_file)]
        for extra in options.variant_files:
            args += ["-m", str(extra)]
        if len(options.pythons) > 1:  # after the recipe's file: its python key is replaced, as --python does
            args += ["-m", str(python_variant_file(options))]
        if options.target_platform:
            args += ["--variants", f"{{target_platform: {options.target_platform}}}"]
        args += ["--no-anaconda-upload", "--package-format", options.package_format]
        if options.compression_level is not None:
            args += ["--zstd-compression-level", str(options.compression_level)]
        if not options.run_tests:
            args.append("--no-test")
        args += ["--croot", str((options.work_dir / "conda-bld").resolve())]
        return args

    def describe(self, recipe_dir: Path, options: BuildOptions) -> list[str]:
        command = find_conda_build() or ("conda", "build")
        return [" ".join(self.argv(command, recipe_dir, options))]

    def build(self, recipe_dir: Path, options: BuildOptions) -> EngineResult:
        """One `conda build` run. The first command that may run conda-build is not asked first
        (`conda build --version` starts conda, a second or more): only when the build fails is it
        checked, and a command that cannot run conda-build at all gives way to the next that can."""
        if not (recipe_dir / V0_RECIPE).is_file():
            raise UsageError(f"{recipe_dir} has no {V0_RECIPE}; conda-build builds v0 recipes")
        if options.pack_from_stage:  # issue 35's prototype covers rattler-build's packaging rules only
            raise UsageError("--pack-from-stage: rattler-build only for now (use --engine rattler-build)")
        commands = _conda_build_commands()
        if not commands:
            raise EnvironmentProblem(
                "conda-build is not installed",
                fix="`conda install conda-build`, or use --engine rattler-build",
            )
        if len(options.pythons) > 1:
            write_python_variants(python_variant_file(options), options.pythons)
        started = time.monotonic()
        before = _package_files(options.output_dir, options.package_format)
        code, built, log_path = self._run(commands[0], recipe_dir, options, before)
        if code != 0 and not _works(commands[0]):  # not the recipe's failure: no conda-build there
            log_path.unlink(missing_ok=True)
            command = find_conda_build()
            if command is None:
                raise EnvironmentProblem(
                    "conda-build is not installed",
                    fix="`conda install conda-build`, or use --engine rattler-build",
                )
            code, built, log_path = self._run(command, recipe_dir, options, before)
        if code != 0:
            raise BuildFailed(
                f"conda build exited with {code} for {recipe_dir}: "
                f"{with_channels(log_error_line(log_path), options)}",
                diagnosis=diagnose.summary(diagnose.diagnose_file(log_path)),
                log_path=str(log_path),
            )
        if not built:
            skipped = (f"{recipe_dir.name} (build/skip holds for every variant)",)
            return EngineResult(self.name, (), log_path, time.monotonic() - started, skipped)
        return EngineResult(self.name, tuple(built), log_path, time.monotonic() - started)

    def _run(
        self,
        command: tuple[str, ...],
        recipe_dir: Path,
        options: BuildOptions,
        before: dict[Path, tuple[int, int, int]],
    ) -> tuple[int, list[Path], Path]:
        """Run the build into its log: (exit status, the packages it wrote in build order, the log)."""
        log_path = log_file_for(options, recipe_dir.resolve().name, self.name)
        argv = self.argv(command, recipe_dir, options)
        with BuildLog(log_path, echo=options.echo, opened=options.log_opened) as log:
            log.write("condapipe: " + " ".join(argv))
            if options.compression_threads and options.package_format == "conda":
                log.write(f"condapipe: compression threads {options.compression_threads}")
            try:
                code = stream_process(argv, log, env=build_environment(options))
            except OSError as exc:  # not runnable (a dangling link): as a shell says it, then the next
                log.write(f"condapipe: cannot run {command[0]}: {exc.strerror or exc}")
                code = 127
            after = _package_files(options.output_dir, options.package_format)
            built = sorted((p for p, st in after.items() if before.get(p) != st), key=lambda p: (after[p], p))
            if code == 0 and not built:  # `build: skip` holds for every variant: conda-build skips it
                log.write(f"condapipe: conda-build skips {recipe_dir}: build/skip holds for every variant")
        return code, built, log.path

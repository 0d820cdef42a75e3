"""conda-build engine: runs `conda build` on a v0 recipe (meta.yaml + conda_build_config.yaml).

Users who already have conda get the builder the PyTorch project itself used. The adapter is
only argv plumbing: every option of BuildOptions maps to a documented `conda build` flag, the
package paths come from `conda build --output`, and the log is streamed and kept.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from functools import lru_cache
from pathlib import Path

from condapipe.engines import diagnose
from condapipe.engines.base import V0_RECIPE, BuildOptions, EngineResult, log_file_for
from condapipe.engines.logs import BuildLog, stream_process
from condapipe.errors import BuildFailed, EnvironmentProblem, UsageError


@lru_cache(maxsize=8)
def _works(command: tuple[str, ...]) -> bool:
    try:
        proc = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def find_conda_build() -> tuple[str, ...] | None:
    """The command that runs conda-build: `conda build`, else the standalone `conda-build`."""
    conda = shutil.which("conda")
    if conda and _works((conda, "build")):
        return (conda, "build")
    standalone = shutil.which("conda-build")
    if standalone and _works((standalone,)):
        return (standalone,)
    return None


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


# conda-build's interpreter reads this folder's sitecustomize: its compression threads (below).
THREADS_SITE = Path(__file__).with_name("conda_build_site")


def build_environment(options: BuildOptions) -> dict[str, str]:
    """The environment `conda build` runs in: condapipe's, the build's extra variables and, for a
    `.conda`, the compression threads (conda-build has no option: conda-package-handling reads a
    module constant, set by THREADS_SITE's sitecustomize from CONDAPIPE_ZSTD_THREADS)."""
    env = {**os.environ, **dict(options.env)}
    if options.package_format == "conda" and options.compression_threads:
        env["CONDAPIPE_ZSTD_THREADS"] = str(options.compression_threads)
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(THREADS_SITE) + (os.pathsep + rest if rest else "")
    return env


def _written(path: Path) -> Path:
    """Where conda-build wrote the package `--output` named: an output with its own `target:`
    (split-packages/_output_specific_subdir) is named under the recipe's subdir but written under
    its target's; the one file of that name in another subdir folder is it."""
    if path.is_file():
        return path
    found = [p for p in path.parent.parent.glob(f"*/{path.name}") if p.is_file()]
    return found[0] if len(found) == 1 else path


class CondaBuildEngine:
    """Builds `meta.yaml` recipes with `conda build`."""

    name = "conda-build"
    recipe_file = V0_RECIPE

    def available(self) -> bool:
        return find_conda_build() is not None

    def argv(
        self, command: tuple[str, ...], recipe_dir: Path, options: BuildOptions, *, output: bool = False
    ) -> list[str]:
        """The exact `conda build` command line for this recipe and these options."""
        if options.package_format == "tar.bz2" and options.compression_level is not None:
            raise UsageError("conda-build has no bzip2 compression level option; drop --compression-level")
        args = [*command, str(recipe_dir)]
        if output:
            args.append("--output")
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

    def expected_packages(
        self, command: tuple[str, ...], recipe_dir: Path, options: BuildOptions
    ) -> list[Path]:
        """Ask conda-build where the packages will land (`conda build --output`). It renders the
        recipe and solves its build/host environments, so a missing dependency fails here: the
        output is kept as the build log and the user sees conda's error line, not its help text."""
        argv = self.argv(command, recipe_dir, options, output=True)
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            log_path = log_file_for(options, recipe_dir.resolve().name, self.name)
            with BuildLog(log_path) as log:
                log.write("condapipe: " + " ".join(argv))
                log.write(proc.stdout or "")
                log.write(proc.stderr or "")
                log_path = log.path
            raise BuildFailed(
                f"`conda build --output` failed for {recipe_dir}: "
                f"{with_channels(error_line(proc.stderr, proc.stdout), options)}",
                diagnosis=diagnose.summary(diagnose.diagnose_file(log_path)),
                log_path=str(log_path),
            )
        lines = [line.strip() for line in proc.stdout.splitlines()]
        # A recipe whose `build: skip` holds for every variant names nothing: conda-build skips it.
        return [Path(line) for line in lines if line.endswith(f".{options.package_format}")]

    def build(self, recipe_dir: Path, options: BuildOptions) -> EngineResult:
        if not (recipe_dir / V0_RECIPE).is_file():
            raise UsageError(f"{recipe_dir} has no {V0_RECIPE}; conda-build builds v0 recipes")
        command = find_conda_build()
        if command is None:
            raise EnvironmentProblem(
                "conda-build is not installed",
                fix="`conda install conda-build`, or use --engine rattler-build",
            )
        if len(options.pythons) > 1:
            write_python_variants(python_variant_file(options), options.pythons)
        started = time.monotonic()
        expected = self.expected_packages(command, recipe_dir, options)
        log_path = log_file_for(options, recipe_dir.resolve().name, self.name)
        if not expected:
            with BuildLog(log_path, echo=options.echo) as log:
                log.write(f"condapipe: conda-build skips {recipe_dir}: build/skip holds for every variant")
                log_path = log.path
            skipped = (f"{recipe_dir.name} (build/skip holds for every variant)",)
            return EngineResult(self.name, (), log_path, time.monotonic() - started, skipped)
        argv = self.argv(command, recipe_dir, options)
        with BuildLog(log_path, echo=options.echo) as log:
            log.write("condapipe: " + " ".join(argv))
            if options.compression_threads and options.package_format == "conda":
                log.write(f"condapipe: compression threads {options.compression_threads}")
            code = stream_process(argv, log, env=build_environment(options))
            log_path = log.path
        if code != 0:
            raise BuildFailed(
                f"conda build exited with {code} for {recipe_dir}: "
                f"{with_channels(log_error_line(log_path), options)}",
                diagnosis=diagnose.summary(diagnose.diagnose_file(log_path)),
                log_path=str(log_path),
            )
        expected = [_written(p) for p in expected]
        missing = [p for p in expected if not p.is_file()]
        if missing:
            raise BuildFailed(
                f"conda build succeeded but did not write {', '.join(map(str, missing))}",
                log_path=str(log_path),
            )
        return EngineResult(self.name, tuple(expected), log_path, time.monotonic() - started)

"""`condapipe fix PACKAGE|DIR…`: relocatable rpaths, vendored libraries, repack in place."""

from __future__ import annotations

import stat
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.progress import Progress as RichProgress
from rich.table import Table

from condapipe.cli.flags import (
    FolderPath,
    build_prefix_option,
    dry_run_option,
    jobs_option,
    json_option,
    output_dir_option,
)
from condapipe.cli.output import console, err_console, print_json
from condapipe.errors import BuildFailed, UsageError
from condapipe.fix.fixer import FixOptions, FixReport, fix_package, fix_prefix
from condapipe.fix.patchers import PATCHER_NAMES, RPATH, RUNPATH
from condapipe.fix.rpath import families, rules_for
from condapipe.package.io import PACKAGE_SUFFIXES, PackOptions, Progress
from condapipe.safe_paths import destination


@click.command("fix")
@click.argument("targets", nargs=-1, required=True, type=FolderPath(path_type=Path))
@click.option(
    "--family",
    default="default",
    show_default=True,
    type=click.Choice(families()),
    help="Package family whose per-directory rpath rules apply (its profile, recipes/<family>/family.yaml).",
)
@click.option(
    "--rpath",
    "extra_rpaths",
    multiple=True,
    metavar="DIR",
    help="Extra rpath folder relative to the prefix (conda-build's build/rpaths). Repeatable.",
)
@build_prefix_option("Absolute build prefix whose rpath entries become $ORIGIN-relative. Repeatable.")
@click.option(
    "--vendor",
    multiple=True,
    metavar="LIB",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="External library to copy into the package and re-link against. Repeatable.",
)
@click.option(
    "--patcher",
    type=click.Choice(PATCHER_NAMES),
    default="auto",
    show_default=True,
    help="Force one patcher; auto edits in place when the new rpath fits.",
)
@click.option("--runpath", is_flag=True, help="Write DT_RUNPATH instead of the default DT_RPATH.")
@jobs_option("Parallel workers (0: all cores).")
@output_dir_option("Write fixed packages here instead of replacing them.", channel=False)
@click.option("--zstd-level", type=click.IntRange(1, 22), default=19, show_default=True)
@click.option("--threads", type=click.IntRange(min=0), default=0, help="zstd threads (0: all cores).")
@click.option(
    "--max-memory",
    "max_memory_mib",
    type=click.IntRange(min=0),
    default=None,
    help="MiB the zstd workers may use: fewer or leaner workers (smaller match tables) to fit "
    "(default: a quarter of the memory available; 0: no bound).",
)
@click.option(
    "--any-dir",
    is_flag=True,
    help="Fix a folder that is neither a conda prefix (conda-meta/) nor an unpacked package (info/).",
)
@dry_run_option
@json_option
def command(
    targets: tuple[Path, ...],
    family: str,
    extra_rpaths: tuple[str, ...],
    build_prefixes: tuple[str, ...],
    vendor: tuple[Path, ...],
    patcher: str,
    runpath: bool,
    jobs: int,
    output_dir: Path | None,
    zstd_level: int,
    threads: int,
    max_memory_mib: int | None,
    any_dir: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Rewrite rpaths of every ELF file in each PACKAGE (.conda/.tar.bz2) or prefix DIR."""
    for target in targets:
        destination(target, "fix")  # '' is not the current directory, / is never a prefix
    for lib in vendor:
        if not stat.S_ISREG(lib.stat().st_mode):  # a FIFO would hang the copy
            raise UsageError(f"--vendor {lib}: not a regular file")
    if output_dir is not None:
        destination(output_dir, "--output-dir")
    for prefix in build_prefixes:
        if not prefix.startswith("/"):
            raise UsageError(f"--build-prefix must be an absolute path, not {prefix!r}")
    options = FixOptions(
        rules=rules_for(family).with_extra(extra_rpaths),
        tag=RUNPATH if runpath else RPATH,
        patcher=patcher,
        build_prefixes=build_prefixes,
        vendor=vendor,
        jobs=jobs,
        dry_run=dry_run,
    )
    pack_options = PackOptions(zstd_level=zstd_level, threads=threads)
    if max_memory_mib is not None:
        pack_options = PackOptions(zstd_level=zstd_level, threads=threads, max_memory_mib=max_memory_mib)
    reports: list[FixReport] = []
    for target in targets:
        if target.is_dir():
            if output_dir:
                raise UsageError("--output-dir applies to package files, not to a prefix folder")
            if not any_dir and not any((target / marker).is_dir() for marker in ("conda-meta", "info")):
                raise UsageError(
                    f"{target}: not a conda prefix (no conda-meta/) or unpacked package (no info/); "
                    "pass --any-dir to fix its ELF files anyway"
                )
            report = fix_prefix(target, options, prefixes=(str(target.absolute()), str(target.resolve())))
        elif str(target).endswith(PACKAGE_SUFFIXES):
            with _packing_progress(target.name, enabled=not as_json and not dry_run) as progress:
                report = fix_package(
                    target, options, output_dir=output_dir, pack_options=pack_options, progress=progress
                )
        elif not target.exists():
            raise UsageError(f"{target}: no such file or directory")
        else:
            raise UsageError(f"{target}: expected a .conda/.tar.bz2 package or a prefix folder")
        reports.append(report)
    if as_json:
        print_json([r.to_dict() for r in reports])
    else:
        for report in reports:
            _print(report)
    failed = [r for r in reports if not r.ok]
    if failed:
        raise BuildFailed(f"fix failed for {failed[0].target}", diagnosis="; ".join(failed[0].errors[:3]))


@contextmanager
def _packing_progress(name: str, *, enabled: bool) -> Iterator[Progress | None]:
    """A progress bar on a terminal for the repack (minutes at level 19 for GB packages)."""
    if not enabled or not err_console.is_terminal:
        yield None
        return
    bar = RichProgress(*RichProgress.get_default_columns(), console=err_console, transient=True)
    task = bar.add_task(f"repacking {name}", total=None)

    def advance(done: int, total: int) -> None:
        bar.update(task, advance=done, total=total)

    with bar:
        yield advance


def _print(report: FixReport) -> None:
    verb = "would fix" if report.dry_run else "fixed"
    used = Counter(f.patcher for f in report.changed)
    table = Table(title=f"{verb} {report.target}", show_header=True)
    table.add_column("file")
    table.add_column("rpath")
    table.add_column("patcher")
    for f in report.changed:
        table.add_row(f.path, f.new_rpath, f.patcher or "")
    if report.changed:
        console.print(table)
    summary = ", ".join(f"{n} {name}" for name, n in sorted(used.items())) or "nothing to change"
    console.print(
        f"{verb} {len(report.changed)}/{len(report.files)} ELF files ({summary}) "
        f"in {report.elapsed_s:.2f}s" + (f" -> {report.output}" if report.output else ""),
        markup=False,
        soft_wrap=True,
    )
    for v in report.vendored:
        console.print(f"vendored {v['source']} as {v['path']}", markup=False, soft_wrap=True)
    for w in report.warnings:
        err_console.print(f"warning: {w}", markup=False, soft_wrap=True)

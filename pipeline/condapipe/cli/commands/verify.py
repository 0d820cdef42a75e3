"""`condapipe verify PACKAGE…`: refuse packages that are tampered, unrelocatable or lack archs."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from condapipe.cli.flags import (
    build_prefix_option,
    jobs_option,
    json_option,
    single_cuda_option,
    target_platform_option,
)
from condapipe.cli.output import console, err_console, print_json
from condapipe.errors import BuildFailed
from condapipe.facts.arch import ArchList, parse_arch_list
from condapipe.verify.verifier import VerifyReport, verify_package


@click.command("verify")
@click.argument("packages", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--arch",
    "arch_text",
    metavar="LIST",
    help='CUDA archs the package must hold, e.g. "8.0;9.0+PTX": missing ones are errors '
    "(default: the list the package records, if any).",
)
@single_cuda_option(
    None,
    "CUDA version the package targets: checks --arch against it, or supplies the default arch "
    "list of the package's family (magma's for magma-cuda*) when the package records none.",
)
@build_prefix_option("Build prefix or work directory no file may mention. Repeatable.")
@click.option(
    "--dep-lib",
    "dep_libs",
    multiple=True,
    metavar="GLOB",
    help="Needed-library name a run dependency provides (beyond data/linkage.yaml). Repeatable.",
)
@target_platform_option("Platform for the system-library allowlist (default: the package's subdir).")
@click.option("--deep", is_flag=True, help="Also decompress every fatbin payload and check it.")
@jobs_option("Parallel hashing (0: all cores).")
@json_option
def command(
    packages: tuple[Path, ...],
    arch_text: str | None,
    cuda: str | None,
    build_prefixes: tuple[str, ...],
    dep_libs: tuple[str, ...],
    platform: str | None,
    deep: bool,
    jobs: int,
    as_json: bool,
) -> None:
    """Check hashes, rpaths, needed libraries and CUDA archs of each PACKAGE."""
    archs: ArchList | None = None
    if arch_text:
        archs = parse_arch_list(arch_text, cuda=cuda)
    reports = [
        verify_package(
            p,
            archs=archs,
            cuda=cuda,
            build_prefixes=build_prefixes,
            dep_libs=dep_libs,
            platform=platform,
            deep=deep,
            jobs=jobs,
        )
        for p in packages
    ]
    if as_json:
        print_json([r.to_dict() for r in reports])
    else:
        for r in reports:
            _print(r)
    bad = [r for r in reports if not r.ok]
    if bad:
        count = sum(len(r.errors) for r in bad)
        raise BuildFailed(
            f"verify found {count} defect(s) in {len(bad)} package(s)", diagnosis=bad[0].errors[0]
        )


def _print(report: VerifyReport) -> None:
    status = "[green]ok[/green]" if report.ok else "[red]FAILED[/red]"
    summary = f"{report.package}: {report.files_checked} files hashed, {report.elf_files} ELF files"
    console.print(f"{status} {escape(summary)}", soft_wrap=True)
    if report.archs:
        console.print(
            f"  CUDA archs checked: {report.archs} ({report.archs_source})", markup=False, soft_wrap=True
        )
    for prerequisite, rel in sorted(report.static_links.items()):
        console.print(f"  {prerequisite} linked statically into {rel}", markup=False, soft_wrap=True)
    for rel, fat in sorted(report.fatbins.items()):
        archs = ", ".join([*fat["sass"], *fat["ptx"]])  # type: ignore[misc]
        console.print(f"  {rel}: {archs}", markup=False, soft_wrap=True)
    for e in report.errors:
        err_console.print(f"  [red]error[/red]: {escape(e)}", soft_wrap=True)
    for w in report.warnings:
        err_console.print(f"  [yellow]warning[/yellow]: {escape(w)}", soft_wrap=True)

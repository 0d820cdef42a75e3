"""`condapipe patches list|check`: show which source fixes a build gets, and test them on a tree."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from condapipe.cli.flags import json_option, settings_from_flags, single_cuda_option, target_platform_option
from condapipe.cli.output import console, print_json
from condapipe.errors import BuildFailed, UsageError
from condapipe.facts.families import known_packages, profile
from condapipe.render.patch_catalog import (
    Catalog,
    PatchEntry,
    applicable,
    cuda_version,
    load_catalog,
    parse_version,
)
from condapipe.render.patch_check import CONFIG, FAILS, check_entries


def _parse_for(text: str) -> tuple[str, str | None]:
    """'pytorch==1.13.0' -> ('pytorch', '1.13.0'); 'pytorch' -> ('pytorch', None)."""
    name, sep, version = text.partition("==")
    name = name.strip()
    if not name or (sep and not version.strip()) or any(c in name for c in "<>=!~ "):
        raise UsageError(f"--for expects PACKAGE or PACKAGE==VERSION (e.g. pytorch==1.13.0), got {text!r}")
    if sep:
        parse_version(version.strip())
        return name, version.strip()
    return name, None


def _catalog_for(target: str | None, catalog_path: Path | None) -> tuple[Catalog, str | None]:
    """The catalog and target a build of a family reads: its profile's `patches:` (libtorch builds
    get upstream pytorch's entries; a family with an index of its own, that index); --catalog wins."""
    if target is not None:
        name, version = _parse_for(target)
        if name in known_packages():
            source = profile(name).patches
            if not source.upstream:
                raise UsageError(f"{name} applies no patches (its profile's `patches:` is empty)")
            if catalog_path is None:
                catalog_path = source.index
            target = f"{source.upstream}=={version}" if version else source.upstream
    return load_catalog(catalog_path), target


def _select(
    catalog: Catalog, target: str | None, cuda: str | None, platform: str, board: str | None
) -> list[PatchEntry]:
    cuda_version(cuda)  # a misspelt --cuda is an error even where it filters nothing
    if target is None:
        return list(catalog.entries)
    package, version = _parse_for(target)
    if package not in catalog.packages():
        known = ", ".join(catalog.packages())
        raise UsageError(f"no patches are catalogued for {package!r}; known packages: {known}")
    if version is None:
        return [e for e in catalog.entries if e.package == package]
    if board is not None:
        platform = "linux-aarch64"
    return applicable(package, version, cuda, platform, board=board, catalog=catalog)


def _scope(entry: PatchEntry) -> str:
    parts = [f"{entry.package} {entry.versions or '(all)'}"]
    parts.append(f"cuda {entry.cuda}" if entry.cuda else "cpu+cuda")
    parts.append(",".join(entry.platforms))
    return "; ".join(parts)


def _what(entry: PatchEntry) -> str:
    if entry.patch_file is not None:
        return f"{entry.package}/{entry.patch_file.name}"
    return " ".join(f"{k}={v}" for k, v in entry.env)


_for = click.option(
    "--for",
    "target",
    metavar="PACKAGE[==VERSION]",
    help="The same as PACKAGE --version VERSION, in one word: pytorch==1.13.0.",
)
_package = click.argument("package", required=False)
_version = click.option("--version", help="The build's upstream version, e.g. 2.4.1 (with PACKAGE).")


def _target(package: str | None, version: str | None, target: str | None) -> str | None:
    """PACKAGE --version V (as every other command takes a build) or --for PACKAGE==V: one target."""
    if package is None:
        if version is not None:
            raise UsageError("--version needs PACKAGE: condapipe patches list pytorch --version 2.4.1")
        return target
    if target is not None:
        raise UsageError(f"give PACKAGE --version or --for, not both ({package} and --for {target})")
    if any(c in package for c in "<>=!~ "):
        raise UsageError(f"PACKAGE is a name ({package!r}); the version goes in --version")
    return f"{package}=={version}" if version else package


def _build(
    package: str | None,
    version: str | None,
    target: str | None,
    cuda: str | None,
    platform: str | None,
    board: str | None,
) -> tuple[str | None, str, str, str | None]:
    """The build the command is about, through the settings cascade as every command reads it: the
    flags, else the config file's package, version, CUDA, platform and Jetson board (defaults: cpu,
    linux-64). Returns (target, cuda, platform, board)."""
    target = _target(package, version, target)
    flags = {"cuda": (cuda,) if cuda else (), "platform": platform, "jetson": board}
    settings = settings_from_flags(_parse_for(target)[0] if target else None, flags)
    given = settings.spec_dict()
    if target is None and settings.package:
        target = f"{settings.package}=={given['version']}" if given.get("version") else settings.package
    elif target is not None and "==" not in target and given.get("version"):
        target = f"{target}=={given['version']}"
    cudas = given.get("cuda") or ["cpu"]
    if len(cudas) > 1:
        raise UsageError(
            f"patches looks at one build: give one --cuda (the config file names {' '.join(cudas)})"
        )
    return target, str(cudas[0]), str(given.get("platform") or "linux-64"), given.get("jetson")


_cuda = single_cuda_option(None, "CUDA version of the build, or cpu (default: the config file's, else cpu).")
_platform = target_platform_option("Target platform (default: the config file's, else linux-64).")
_jetson = click.option(
    "--jetson",
    "board",
    metavar="BOARD",
    default=None,
    help="A build for this Jetson board (nano, tx2, xavier, orin); implies linux-aarch64.",
)
_catalog = click.option(
    "--catalog",
    "catalog_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Use this index.yaml instead of the shipped catalog.",
)


@click.group(name="patches")
def command() -> None:
    """Version-scoped source fixes for pytorch and magma: list them, check them on a source tree."""


@command.command(name="list")
@_package
@_version
@_for
@_cuda
@_platform
@_jetson
@_catalog
@json_option
def list_cmd(
    package: str | None,
    version: str | None,
    target: str | None,
    cuda: str | None,
    platform: str | None,
    board: str | None,
    catalog_path: Path | None,
    as_json: bool,
) -> None:
    """Show the catalog, or what applies to one build (PACKAGE --version V) and why."""
    target, cuda, platform, board = _build(package, version, target, cuda, platform, board)
    catalog, selected = _catalog_for(target, catalog_path)
    entries = _select(catalog, selected, cuda, platform, board)
    if as_json:
        print_json(
            {"for": target, "cuda": cuda, "platform": platform, "entries": [e.to_dict() for e in entries]}
        )
        return
    title = f"patches for {target} (cuda {cuda}, {platform})" if target else f"patch catalog {catalog.path}"
    console.print(f"[bold]{title}[/]: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}")
    for e in entries:
        console.print(f"[bold]{escape(e.id)}[/] ({e.kind}) {escape(_what(e))}", highlight=False)
        console.print(f"    applies to: {_scope(e)}", markup=False)
        console.print(f"    why: {e.reason}", markup=False)
        console.print(f"    upstream: {e.upstream}", markup=False)


@command.command(name="check")
@click.option(
    "--source",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Upstream source tree to dry-run the patches against (not modified).",
)
@_package
@_version
@_for
@_cuda
@_platform
@_jetson
@_catalog
@json_option
def check_cmd(
    source: Path,
    package: str | None,
    version: str | None,
    target: str | None,
    cuda: str | None,
    platform: str | None,
    board: str | None,
    catalog_path: Path | None,
    as_json: bool,
) -> None:
    """Dry-run every applicable patch against a source tree: applies / already applied / fails."""
    target, cuda, platform, board = _build(package, version, target, cuda, platform, board)
    if target is None or _parse_for(target)[1] is None:
        raise UsageError("patches check needs PACKAGE --version V (e.g. pytorch --version 1.13.0)")
    if not source.is_dir():
        raise UsageError(f"--source {source} is not a directory")
    catalog, selected = _catalog_for(target, catalog_path)
    entries = _select(catalog, selected, cuda, platform, board)
    results = check_entries(entries, source)
    failed = [r for r in results if r.status == FAILS]
    if as_json:
        print_json({"for": target, "cuda": cuda, "platform": platform, "source": str(source),
                    "ok": not failed, "results": [r.to_dict() for r in results]})  # fmt: skip
    else:
        table = Table(title=f"patch check: {target} (cuda {cuda}, {platform}) on {source}")
        for col in ("id", "status", "detail"):
            table.add_column(col, overflow="fold")
        for r in results:
            style = {"fails": "red", "applies": "green", "already-applied": "yellow"}.get(r.status, "")
            table.add_row(r.entry_id, f"[{style}]{r.status}[/]" if style else r.status, r.detail)
        console.print(table)
        for r in failed:
            for hunk in r.rejected:
                console.print(f"[red]rejected hunk[/] {r.entry_id}: {hunk.file} #{hunk.number}")
                console.print(hunk.text, markup=False, highlight=False)
        if not results:
            console.print("nothing applies")
    if failed:
        names = ", ".join(r.entry_id for r in failed)
        checked = sum(1 for r in results if r.status != CONFIG)
        raise BuildFailed(f"{len(failed)} of {checked} patches do not apply to {source}: {names}")

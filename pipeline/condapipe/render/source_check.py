"""A `--source` tree or tarball is the project and version the build asks for, before patches apply.

Patches are chosen for the requested version; applied to another release they fail deep inside
the engine ("Hunk #1 FAILED"), or worse, apply and build the wrong thing under the requested
version's name. So the source a user hands in is read first: the file and pattern the family's
profile names (`source_version` in recipes/<family>/family.yaml: pytorch's version.txt,
magma's include/magma_types.h, ...), from the tree or from inside the tarball, and compared with
the spec's version. A wrong or foreign tree is a one-line UsageError naming the expected version
and the patches that would have applied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from condapipe.buildspec.build_spec import BuildSpec
from condapipe.errors import UsageError
from condapipe.package.safe_extract import STREAM_ERRORS, Budget, Limits, source_members
from condapipe.render.families._common import family_data

_MAX_VERSION_FILE = 1 << 20  # version files are small; a bigger member is not the one we want


def local_source(spec: BuildSpec) -> Path | None:
    """The tree or tarball of --source on this machine, None for upstream sources."""
    src = spec.source
    if src.kind == "path" and src.path is not None:
        return Path(src.path)
    if src.kind == "url" and src.url and src.url.startswith("file://"):
        return Path(unquote(urlparse(src.url).path))
    return None


def _rules(package: str) -> list[dict[str, Any]]:
    rules = family_data(package).get("source_version") or []
    return [r for r in rules if isinstance(r, dict) and r.get("file") and r.get("pattern")]


def _from_tree(root: Path, rel: str) -> str | None:
    path = root / rel
    if path.is_symlink() or not path.is_file():
        return None
    with path.open("rb") as fh:
        return fh.read(_MAX_VERSION_FILE).decode("utf-8", errors="replace")


def _archive_members(archive: Path, wanted: set[str]) -> dict[str, str]:
    """The files `wanted` (paths below the archive's single top folder, or at its root) read from
    inside a release archive, without unpacking it: a stream read under the same bounds as the
    unpack (condapipe.package.safe_extract: members, expanded size, compression ratio), stopping
    as soon as every wanted file was found."""
    found: dict[str, str] = {}

    def rel_of(name: str) -> str | None:
        parts = PurePosixPath(name).parts
        for skip in (1, 0):
            rel = "/".join(parts[skip:])
            if rel in wanted:
                return rel
        return None

    members = source_members(archive, Budget(archive, Limits.for_sources()))
    try:
        for reader, member in members:
            rel = rel_of(member.name)
            if rel and member.isfile() and member.size <= _MAX_VERSION_FILE and rel not in found:
                with reader.extractfile(member) as handle:
                    found[rel] = handle.read(_MAX_VERSION_FILE).decode("utf-8", errors="replace")
            if len(found) == len(wanted):
                break
    except UsageError as exc:
        raise UsageError(f"--source {exc}") from None
    except STREAM_ERRORS as exc:
        why = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
        raise UsageError(f"--source {archive}: not a readable source archive ({why})") from None
    finally:
        members.close()
    return found


def source_version(package: str, source: Path) -> tuple[str, str] | None:
    """(the version the tree or tarball says it is, the file that says so); None when the family
    names no version file; a UsageError when none of its files is there (not that project)."""
    rules = _rules(package)
    if not rules:
        return None
    files = [str(r["file"]) for r in rules]
    texts = (
        {f: t for f in files if (t := _from_tree(source, f)) is not None}
        if source.is_dir()
        else _archive_members(source, set(files))
    )
    for rule in rules:
        text = texts.get(str(rule["file"]))
        if text is None:
            continue
        match = re.search(str(rule["pattern"]), text, re.M)
        if match:
            return ".".join(str(int(g)) for g in match.groups()), str(rule["file"])
    kind = "tree" if source.is_dir() else "archive"
    raise UsageError(
        f"--source {source}: not a {package} source {kind} (no {' or '.join(files)} with a version in it)"
    )


def _release(version: str) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", version.split("+", 1)[0])
    return tuple(int(n) for n in numbers[:3])


def check_source(spec: BuildSpec, patches: Sequence[str] = ()) -> None:
    """Refuse a --source that is not `spec.package` at `spec.version` (UsageError, exit 2)."""
    source = local_source(spec)
    if source is None:
        return
    found = source_version(spec.package, source)
    if found is None:
        return
    version, where = found
    if _release(version) == _release(spec.version):
        return
    would = f"; the patches for {spec.version} would not apply to it: {', '.join(patches)}" if patches else ""
    raise UsageError(
        f"--source {source} is {spec.package} {version} ({where}), not the {spec.version} this build "
        f"asks for{would} (fix: pass a {spec.version} tree or tarball, or --version {version})"
    )


def source_advice(spec: BuildSpec) -> str:
    """Where the build's source comes from and how to hand it over when it cannot be downloaded."""
    src = spec.source
    if src.kind == "git" and src.url:
        rev = src.rev or "HEAD"
        return (
            f"the source is git {src.url} at {rev}: where the network works, run "
            f"`git clone --recursive --branch {rev} {src.url}` (or download the release tarball with its "
            f"submodules), then pass --source DIR|TARBALL"
        )
    if src.kind == "url" and src.url:
        fetch = src.https_url or src.url
        sha = f" (sha256 {src.sha256})" if src.sha256 else ""
        name = PurePosixPath(urlparse(fetch).path).name or "the archive"
        return (
            f"the source is {src.url}: download {fetch}{sha} where the network works, "
            f"then pass --source {name}"
        )
    return "pass the source yourself with --source DIR|TARBALL"

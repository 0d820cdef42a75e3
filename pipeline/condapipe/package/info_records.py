"""What a package's info/ records about the build that made it, told as condapipe built it.

An engine records where it looked for dependencies (info/about.json `channels`) and, for
rattler-build, its folders and packing settings (info/recipe/rendered_recipe.yaml). Under
condapipe those name its work dir: a staging channel inside it (where the engine's own packages
wait for fix and verify) and the engine's scratch folders. A package must never record
build-machine paths of condapipe's work dir, so the staging channel is dropped (the published
channel, the user's, stays), the scratch folders are named relative to the work dir, and, when
the fix step recompresses a package whose level was changed after its build, the compression level
is the one the published file has.

Applied where a package's info/ is written: by the fix step (condapipe.fix.fixer) to an engine's
package, and by the packing pass of --pack-from-stage (condapipe.package.stage_pack) as it writes
the info member, so that the fix step has nothing left to rewrite there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

ABOUT = "info/about.json"
RENDERED = "info/recipe/rendered_recipe.yaml"
WORK_DIR_NAME = "$CONDAPIPE_WORK_DIR"  # what a work-dir path is recorded as


def _local_path(channel: str) -> str:
    if channel.startswith("file://"):
        return unquote(urlparse(channel).path)
    return channel


def _inside(channel: str, work_dir: str) -> bool:
    path = _local_path(channel).rstrip("/")
    return path == work_dir or path.startswith(work_dir + "/")


def _about(data: bytes, work_dir: str) -> bytes | None:
    try:
        about = json.loads(data)
    except ValueError:
        return None
    channels = about.get("channels") if isinstance(about, dict) else None
    if not isinstance(channels, list):
        return None
    kept = [c for c in channels if not (isinstance(c, str) and _inside(c, work_dir))]
    if kept == channels:
        return None
    about["channels"] = kept
    return (json.dumps(about, indent=2, sort_keys=True) + "\n").encode()


def _rendered(data: bytes, work_dir: str, level: int | None) -> bytes | None:
    text = data.decode("utf-8", errors="surrogateescape")
    lines = []
    for line in text.splitlines(keepends=True):
        item = re.match(r"^\s*-\s+(\S+)\s*$", line)
        if item and _inside(item.group(1).strip("'\""), work_dir):
            continue  # a channel entry that is condapipe's staging folder
        lines.append(line)
    new = "".join(lines)
    new = re.sub(re.escape("file://" + work_dir) + r"(?=[/\s'\"]|$)", "file://" + WORK_DIR_NAME, new)
    new = re.sub(re.escape(work_dir) + r"(?=[/\s'\"]|$)", WORK_DIR_NAME, new)
    if level is not None:
        new = re.sub(r"(?m)^(\s*compression_level:\s*)\d+\s*$", rf"\g<1>{level}", new)
    return new.encode("utf-8", errors="surrogateescape") if new != text else None


def rewrite_records(files: Mapping[str, bytes], work_dir: Path, level: int | None = None) -> dict[str, bytes]:
    """The records among `files` (info/ name -> bytes) that change: name -> new bytes. `level`: the
    compression level of the published file (None: leave the recorded one)."""
    work = str(work_dir.resolve()).rstrip("/")
    rewriters = {ABOUT: lambda d: _about(d, work), RENDERED: lambda d: _rendered(d, work, level)}
    changed = {}
    for name, rewrite in rewriters.items():
        if name in files and (new := rewrite(files[name])) is not None:
            changed[name] = new
    return changed


def rewrite_info(root: Path, work_dir: Path, level: int | None = None) -> list[str]:
    """Rewrite the records of the unpacked package at `root` in place; the info/ names changed."""
    found = {}
    for name in (ABOUT, RENDERED):
        path = root / name
        if not path.is_symlink() and path.is_file():
            found[name] = path.read_bytes()
    changed = rewrite_records(found, work_dir, level)
    for name, data in changed.items():
        (root / name).write_bytes(data)
    return list(changed)

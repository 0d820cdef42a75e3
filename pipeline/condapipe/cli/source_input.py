"""`--source TARBALL`: the archive is unpacked by condapipe's safe extraction, and the engine is given
the folder, never the archive.

Engines unpack a source archive without bounds (a 3 MB tarball expanding to 3 GiB, 200,000 members,
an absolute symlink kept in the work tree). So a build first unpacks it with
condapipe.package.safe_extract (size, member count and compression ratio bounded; absolute or
escaping links, devices and FIFOs refused) into WORK_DIR/sources/<sha256 of the archive>/ (a
temporary name, then renamed: a folder there is complete), and the spec's source becomes that
folder — its single top-level folder when the archive has one, as release tarballs do.
"""

from __future__ import annotations

import os
from pathlib import Path

from condapipe.buildspec.build_spec import SOURCE_ARCHIVES
from condapipe.buildspec.settings import Settings
from condapipe.errors import EnvironmentProblem
from condapipe.hashing import hash_file
from condapipe.package.safe_extract import safe_extract_source
from condapipe.scratch import scratch_dir


def archive_source(settings: Settings) -> Path | None:
    """The local source archive the settings name, if any."""
    given = settings.spec.get("source")
    if not isinstance(given, str) or given.startswith("git+") or "://" in given:
        return None
    path = Path(given).expanduser()
    return path if path.name.endswith(SOURCE_ARCHIVES) and path.is_file() else None


def unpacked_source(settings: Settings, work_dir: Path) -> Settings:
    """The settings with a local source archive replaced by the folder it was safely unpacked into."""
    archive = archive_source(settings)
    if archive is None:
        return settings
    digest = hash_file(archive).sha256
    sources = work_dir / "sources"
    dest = sources / digest[:32]
    if not dest.is_dir() or dest.is_symlink():
        try:
            sources.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EnvironmentProblem(
                f"cannot unpack --source {archive} under {sources}: {exc.strerror}",
                "choose a --work-dir you can write to",
            ) from None
        # removed however this ends, an interrupt included (renamed into place: nothing to remove)
        with scratch_dir(f".{digest[:12]}.", sources, suffix=".tmp") as tmp:
            safe_extract_source(archive, tmp)
            os.replace(tmp, dest)
    entries = list(dest.iterdir())
    tree = entries[0] if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink() else dest
    return settings.with_source(str(tree))

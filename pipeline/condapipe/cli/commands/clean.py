"""`condapipe clean`: free a work dir's build trees (and, asked, its caches) safely.

Only what condapipe names inside --work-dir goes (condapipe.plan.clean); the output channel, the
current directory, a local --source tree and $HOME are kept even when they sit inside; a build
running in the work dir holds its lock, and clean waits for nobody: it refuses.
"""

from __future__ import annotations

from pathlib import Path

import click

from condapipe.cli.flags import (
    command_settings,
    dry_run_option,
    json_option,
    output_dir_option,
    work_dir_option,
)
from condapipe.cli.output import console, print_json

EXAMPLE = "condapipe clean --dry-run"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _protected(output_dir: Path) -> list[Path]:
    """Paths clean never removes, wherever they are: the channel, here, $HOME, a local source tree."""

    keep = [output_dir, Path.cwd(), Path.home()]
    source = command_settings(None, {}).spec_dict().get("source")
    if isinstance(source, str) and source and "://" not in source:
        keep.append(Path(source))
    return keep


@click.command("clean")
@work_dir_option("The work dir to clean.")
@output_dir_option("The local channel: never removed, even inside the work dir.")
@click.option("--caches", is_flag=True, help="Also remove the compile cache and the package cache (pkgs/).")
@click.option("--all", "everything", is_flag=True, help="Also the caches, logs and reports (not upload/).")
@dry_run_option
@json_option
def command(
    work_dir: Path, output_dir: Path, caches: bool, everything: bool, dry_run: bool, as_json: bool
) -> None:
    """Remove the build trees (and caches) condapipe left in --work-dir.

    An interrupted build's too; the next build starts over. Nothing outside the work dir is
    touched; links are removed, not followed; the output channel is kept."""
    from condapipe.cli.plan_run import say_on_stderr
    from condapipe.plan.clean import BUILD_TREES, CACHES, RECORDS, plan_clean, remove_entries
    from condapipe.plan.state import work_dir_lock

    names = [*BUILD_TREES, *(CACHES if caches or everything else ()), *(RECORDS if everything else ())]
    if dry_run:
        entries = plan_clean(work_dir, names, _protected(output_dir))
        freed = sum(e.size for e in entries if not e.kept)
    else:
        plan_clean(work_dir, names, ())  # refuses a folder condapipe did not make before locking it
        with work_dir_lock(work_dir, say_on_stderr):  # refuses while a build runs here
            entries = plan_clean(work_dir, names, _protected(output_dir))
            freed = remove_entries(entries)
    if as_json:
        print_json(
            {
                "dry_run": dry_run,
                "work_dir": str(work_dir),
                "bytes": freed,
                "entries": [e.to_dict() for e in entries],
            }
        )
        return
    verb = "would remove" if dry_run else "removed"
    for entry in entries:
        what = (
            f"kept {entry.path} ({entry.kept})" if entry.kept else f"{verb} {entry.path} ({_mib(entry.size)})"
        )
        console.print(what, soft_wrap=True, markup=False, highlight=False)
    left = [n for n in CACHES if (work_dir / n).exists()] if not (caches or everything) else []
    tail = f"; caches kept: {', '.join(left)} (--caches removes them)" if left else ""
    console.print(
        f"{verb} {_mib(freed)} from {work_dir}{tail}", soft_wrap=True, markup=False, highlight=False
    )

"""`condapipe upload`: publish packages to anaconda.org (--channel ORG) or a local channel (--to DIR)."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TransferSpeedColumn
from rich.table import Table

from condapipe.cli.flags import (
    dry_run_option,
    force_option,
    json_option,
    output_dir_option,
    settings_from_flags,
    to_channel_option,
    upload_owner_option,
    work_dir_option,
)
from condapipe.cli.output import console, err_console, print_json
from condapipe.errors import BuildFailed, CondapipeError, EnvironmentProblem, UsageError
from condapipe.publish.tokens import RedactingFilter, Token, resolve_token
from condapipe.publish.upload import (
    Mode,
    RetryPolicy,
    collect_packages,
    resolve_site_url,
    upload_to_anaconda,
    upload_to_directory,
    verify_blockers,
)
from condapipe.publish.upload_result import FileOutcome
from condapipe.safe_paths import destination as checked_folder
from condapipe.value_rules import check_label, check_owner, parse_url, refuse_url_credentials

_LOGGERS = ("condapipe", "binstar", "urllib3", "requests")


class _RichProgress:
    """One byte-counting progress bar per file."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, TaskID] = {}

    def start(self, basename: str, size: int) -> Callable[[int], None]:
        task = self._progress.add_task(escape(basename), total=size)
        self._tasks[basename] = task
        return lambda done: self._progress.update(task, completed=done)

    def finish(self, basename: str) -> None:
        task = self._tasks.pop(basename, None)
        if task is not None:
            self._progress.stop_task(task)


@contextmanager
def _logging(work_dir: Path, debug: bool, token: Token | None, dry_run: bool) -> Iterator[Path | None]:
    """A log file under the work dir (and stderr with --debug), both scrubbed of the token."""
    handlers: list[logging.Handler] = []
    log_path: Path | None = None
    if not dry_run:
        stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.time_ns() % 1_000_000:06d}"
        log_path = work_dir / "logs" / f"upload-{stamp}.log"  # unique: runs may start in one second
        try:
            (work_dir / "logs").mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(log_path, encoding="utf-8"))
        except OSError as exc:  # one line with the path and the fix, not Python's errno text
            raise EnvironmentProblem(
                f"cannot write the upload log under {work_dir / 'logs'}: {exc.strerror or exc}",
                "choose a --work-dir you can write to",
            ) from None
    if debug:
        handlers.append(logging.StreamHandler())
    scrub = RedactingFilter([token])
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    for handler in handlers:
        handler.addFilter(scrub)
        handler.setFormatter(fmt)
        handler.setLevel(logging.DEBUG if debug else logging.INFO)
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    saved = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG if debug else logging.INFO)
        for handler in handlers:
            lg.addHandler(handler)
    try:
        yield log_path
    finally:
        for lg, level in saved:
            lg.setLevel(level)
            for handler in handlers:
                lg.removeHandler(handler)
        for handler in handlers:
            handler.close()


@contextmanager
def _json_on_failure(as_json: bool, destination: str, dry_run: bool, log_path: Path | None) -> Iterator[None]:
    """With --json, a run that stops early (server unreachable, token rejected) still prints JSON."""
    try:
        yield
    except CondapipeError as exc:
        if as_json:
            print_json(
                {
                    "destination": destination,
                    "dry_run": dry_run,
                    "files": [],
                    "failed": 0,
                    "error": str(exc),
                    "exit_code": exc.exit_code,
                    "log": str(log_path) if log_path else None,
                }
            )
        raise


def _labels(outcome: FileOutcome) -> str:
    """The labels an anaconda.org upload gives the file (the target's trailing "[main, dev]")."""
    found = re.search(r" \[([^\]]*)\]$", outcome.target)
    return found.group(1) if found else "-"


def _summary(outcomes: list[FileOutcome], title: str, *, labels: bool = False) -> Table:
    """One row per file, in upload order; with `labels` (an anaconda.org dry run) the labels too."""
    table = Table(title=title)
    columns = ("#", "file", *(("labels",) if labels else ()), "status", "size", "attempts", "detail")
    for col in columns:
        table.add_column(col, justify="right" if col in ("#", "size", "attempts") else "left")
    for n, o in enumerate(outcomes, 1):
        style = "green" if o.status.ok else "red"
        table.add_row(
            str(n),
            escape(o.basename),
            *((escape(_labels(o)),) if labels else ()),
            f"[{style}]{o.status.value}[/]",
            f"{o.size:,}",
            str(o.attempts),
            escape(o.detail),
        )
    return table


def _check_names(owner: str | None, labels: tuple[str, ...], site_url: str | None) -> None:
    """Owner, labels and site are checked before anything is read: they go into API paths."""
    if owner is not None:
        check_owner(owner, "--channel")
    for label in labels:
        check_label(label)
    if site_url is None:
        return
    parts = parse_url(site_url.strip(), "--site-url")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--site-url: expected an http:// or https:// URL with a host")
    refuse_url_credentials(parts, "--site-url", "give the token in $ANACONDA_API_TOKEN or --token-file")


@click.command("upload")
@click.argument("packages", nargs=-1, type=click.Path(path_type=Path, dir_okay=False))
@upload_owner_option
@to_channel_option("Local channel directory to copy into and re-index.")
@click.option(
    "--label", "labels", multiple=True, metavar="L", help="anaconda.org label (repeatable); default main."
)
@click.option("--skip-existing", is_flag=True, help="Leave files already there alone, even if they differ.")
@force_option("Replace files already there that differ from ours.")
@click.option(
    "--site-url",
    metavar="URL",
    help="API site (default: upload.site_url in condapipe.toml, else anaconda-client's).",
)
@click.option(
    "--token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Token file (mode 600). Default: $BINSTAR_API_TOKEN, $ANACONDA_API_TOKEN, `anaconda login`.",
)
@click.option(
    "--config",
    "config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Config file (default: ./condapipe.toml or pyproject.toml [tool.condapipe]); reads [upload].",
)
@click.option("--no-verify", is_flag=True, help="Upload without running `condapipe verify` first.")
@output_dir_option("Where to find packages when none are given.")
@work_dir_option("Logs go to WORK_DIR/logs/.")
@click.option(
    "--retries", type=click.IntRange(1, 20), default=4, show_default=True, help="Attempts per file."
)
@click.option(
    "--retry-delay",
    type=click.FloatRange(0, 600),
    default=2.0,
    show_default=True,
    help="First backoff, doubled each time (s).",
)
@dry_run_option
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    packages: tuple[Path, ...],
    owner: str | None,
    to: Path | None,
    labels: tuple[str, ...],
    skip_existing: bool,
    force: bool,
    site_url: str | None,
    token_file: Path | None,
    config: Path | None,
    no_verify: bool,
    output_dir: Path,
    work_dir: Path,
    retries: int,
    retry_delay: float,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Publish PACKAGES (default: everything under --output-dir), verified and in dependency order.

    A file already there with the same sha256 is reported as already there; a different one is
    refused unless --force. One file's failure does not stop the others; the exit code is 1 if
    any file failed.
    """
    settings = settings_from_flags(None, {"config": config})  # the config file, read once
    if owner is None and to is None:
        configured = settings.upload.get("channel")
        owner = configured if isinstance(configured, str) and configured else None
    if (owner is None) == (to is None):
        raise UsageError(
            "give exactly one destination: --channel/--owner ORG (anaconda.org) or --to DIR (local channel)"
        )
    if to is not None and (labels or site_url or token_file):
        raise UsageError("--label, --site-url and --token-file apply to --channel uploads only")
    if retry_delay != retry_delay:  # NaN passes click's range check
        raise UsageError("--retry-delay must be a number of seconds, not nan")
    _check_names(owner, labels, site_url)
    checked_folder(output_dir, "--output-dir")
    mode = Mode(skip_existing=skip_existing, force=force)
    debug = bool((ctx.obj or {}).get("debug"))
    infos = collect_packages(packages, output_dir)
    blocked = {} if no_verify else verify_blockers(infos)
    token: Token | None = None
    site = ""
    if owner is not None:
        site = resolve_site_url(site_url, settings.upload)
        token = resolve_token(site, token_file, settings.environ)  # files and the environment: no network
        if token is None and dry_run:  # the real run would stop here: say so now
            err_console.print(
                "warning: no anaconda.org token is set (ANACONDA_API_TOKEN, --token-file F or "
                "`anaconda login`): the real upload would stop before sending anything",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
        if dry_run:
            token = None  # a dry run is an offline preview: the token is not used
    index = None
    with _logging(work_dir, debug, token, dry_run) as log_path:
        if owner is not None:
            progress_ui = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=err_console,
                transient=True,
                disable=as_json or not err_console.is_terminal,
            )
            with progress_ui, _json_on_failure(as_json, f"{site}/{owner}", dry_run, log_path):
                outcomes = upload_to_anaconda(
                    infos,
                    owner,
                    site_url=site,
                    token=token,
                    labels=labels,  # none: new files get main, files already there keep theirs
                    mode=mode,
                    retry=RetryPolicy(attempts=retries, base_delay=retry_delay),
                    dry_run=dry_run,
                    blocked=blocked,
                    progress=_RichProgress(progress_ui),
                    state_dir=work_dir / "upload",  # --force journal and backups: a rerun finishes
                    timeout=settings.upload_timeout,  # CONDAPIPE_UPLOAD_TIMEOUT, read by the settings
                )
        else:
            outcomes, index = upload_to_directory(infos, str(to), mode=mode, dry_run=dry_run, blocked=blocked)
    failed = [o for o in outcomes if not o.status.ok]
    destination = f"{site}/{owner}" if owner else str(to)
    if as_json:
        report = {
            "destination": destination,
            "dry_run": dry_run,
            "files": [o.to_dict() for o in outcomes],
            "failed": len(failed),
            "log": str(log_path) if log_path else None,
        }
        if index is not None:
            report["index"] = index.to_dict()
        print_json(report)
    else:
        title = f"{'dry run: ' if dry_run else ''}upload to {destination}"
        console.print(_summary(outcomes, title, labels=owner is not None))
        if log_path:
            console.print(f"log: {escape(str(log_path))}")
    if failed:
        raise BuildFailed(f"{len(failed)} of {len(outcomes)} files failed to upload")

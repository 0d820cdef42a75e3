"""Publish packages: verify, order, then upload each file to anaconda.org or a local channel.

Every file is handled on its own: one failure never stops the others, and the caller gets one
FileOutcome per file to print a summary and pick the exit code. Uploads to anaconda.org retry
the stage → file upload → commit unit on transient failures (5xx, resets, timeouts) with
exponential backoff; a conflict after a retry is settled by comparing the server's sha256, so
a commit whose answer was lost is not reported as a failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from condapipe.errors import CondapipeError, EnvironmentProblem, UsageError
from condapipe.fix.package_io import PackageInfo, read_package_info
from condapipe.hashing import hash_file
from condapipe.publish.anaconda_api import (
    DEFAULT_SITE_URL,
    AnacondaMeta,
    AnacondaSite,
    ApiError,
    Failure,
    PackageMetadataError,
    inspect_for_anaconda,
    normalize_site_url,
)
from condapipe.publish.channel import IndexResult, channel_dir_from_target, find_packages, publish_packages
from condapipe.publish.tokens import Token, redact
from condapipe.publish.upload_order import upload_order
from condapipe.publish.upload_result import FileOutcome, Status

log = logging.getLogger("condapipe.publish.upload")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transient failure is retried (exponential backoff)."""

    attempts: int = 4
    base_delay: float = 2.0
    max_delay: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        return min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))


class Progress(Protocol):
    """Per-file progress display; the command implements it with rich."""

    def start(self, basename: str, size: int) -> Callable[[int], None]: ...

    def finish(self, basename: str) -> None: ...


class NoProgress:
    def start(self, basename: str, size: int) -> Callable[[int], None]:
        return lambda done: None

    def finish(self, basename: str) -> None:
        return None


@dataclass(frozen=True)
class Mode:
    """What to do when the destination already has a file of the same name."""

    skip_existing: bool = False
    force: bool = False

    def __post_init__(self) -> None:
        if self.skip_existing and self.force:
            raise UsageError("--skip-existing and --force exclude each other")


# ---------------------------------------------------------------------------------------------
# Inputs: which files, in which order, verified


def collect_packages(paths: Sequence[Path], output_dir: Path) -> list[PackageInfo]:
    """Read every given package (or all packages under output_dir when none are given), ordered."""
    files = list(paths) if paths else find_packages(output_dir)
    if not files:
        raise UsageError(f"no packages given and none found under {output_dir}")
    seen: dict[str, PackageInfo] = {}
    for path in files:
        info = read_package_info(Path(path))
        key = info.basename
        if key in seen and seen[key].path.resolve() != info.path.resolve():
            raise UsageError(f"{info.path} and {seen[key].path} are both {key}; pass only one")
        seen[key] = info
    return upload_order(list(seen.values()))


def verify_blockers(packages: Sequence[PackageInfo]) -> dict[Path, str]:
    """Run condapipe.verify.verifier on every package; a package with defects maps to their summary.

    The verifier checks the CUDA archs each package records in info/about.json (its promise)."""
    try:
        from condapipe.verify.verifier import verify_package
    except ImportError as exc:
        raise EnvironmentProblem(
            f"the verify stage is not available ({exc})", "pass --no-verify to upload without checks"
        ) from None
    blocked: dict[Path, str] = {}
    for info in packages:
        try:
            report = verify_package(info.path)
        except CondapipeError as exc:
            blocked[info.path] = f"verify failed: {exc}"
            continue
        if not report.ok:
            errors = list(report.errors)
            more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
            blocked[info.path] = "verify failed: " + "; ".join(errors[:3]) + more
    return blocked


def not_attempted(info: PackageInfo, target: str, status: Status, detail: str) -> FileOutcome:
    """The outcome of a file that was never sent (blocked by verify, unreadable)."""
    try:
        digest = hash_file(info.path)
        sha, size = digest.sha256, digest.size
    except OSError:
        sha, size = "", 0
    return FileOutcome(info.path, info.basename, target, status, sha, size, detail)


# ---------------------------------------------------------------------------------------------
# Site URL and token


def configured_upload_settings(config: Path | None = None) -> dict:
    """The [upload] table of condapipe.toml / pyproject [tool.condapipe] (config_file's loader)."""
    from condapipe.spec.config_file import upload_settings

    return upload_settings(config)


def anaconda_client_site_url() -> str | None:
    """The `url` anaconda-client is configured with (`anaconda config --set url ...`), if any."""
    from binstar_client.utils.config import get_config

    try:
        url = get_config().get("url")
    except (OSError, ValueError, AttributeError, TypeError):  # unreadable, or YAML that is not a mapping
        return None
    return url if isinstance(url, str) and url else None


def resolve_site_url(flag: str | None, config: Path | None = None) -> str:
    """--site-url, then upload.site_url in the config file, then anaconda-client's url, then anaconda.org."""
    configured = configured_upload_settings(config).get("site_url")
    if configured is not None and not isinstance(configured, str):
        raise UsageError("upload.site_url in the config file must be a string")
    url = flag or configured or anaconda_client_site_url() or DEFAULT_SITE_URL
    try:
        return normalize_site_url(url)
    except ValueError:
        raise UsageError("the upload site URL is empty") from None


# ---------------------------------------------------------------------------------------------
# anaconda.org


@dataclass
class _FileState:
    attempts: int = 0
    sent: bool = False  # a stage succeeded at least once: a later "exists, same sha" is our commit
    replaced: bool = False
    created_package: bool = False
    created_release: bool = False
    started: float = field(default_factory=time.monotonic)


def _same_file(record: dict, sha256: str, md5: str) -> bool:
    """Compare the server's digest with ours (sha256 when the server reports it, else md5)."""
    if record.get("sha256"):
        return str(record["sha256"]).lower() == sha256
    if record.get("md5"):
        return str(record["md5"]).lower() == md5
    return False


def upload_one(
    site: AnacondaSite,
    owner: str,
    meta: AnacondaMeta,
    labels: tuple[str, ...],
    mode: Mode,
    retry: RetryPolicy,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> FileOutcome:
    """Publish one file to owner on site; never raises for per-file problems."""
    progress = progress or NoProgress()
    path = meta.info.path
    digest = hash_file(path, md5=True)
    size, sha256, md5 = digest.size, digest.sha256, digest.md5 or ""
    target = f"{site.site_url}/{owner}/{meta.basename}" + (f" [{', '.join(labels)}]" if labels else "")
    st = _FileState()

    def outcome(status: Status, detail: str = "") -> FileOutcome:
        secs = time.monotonic() - st.started
        clean = redact(detail, [site.token])
        log.info("%s %s: %s %s", status.value, meta.basename, clean, f"(attempts: {st.attempts})")
        return FileOutcome(path, meta.basename, target, status, sha256, size, clean, st.attempts, secs)

    while True:
        st.attempts += 1
        try:
            record = site.find_dist(owner, meta)
            if record is not None:
                decided = _existing(site, owner, meta, record, sha256, md5, mode, st, dry_run)
                if decided is not None:
                    return outcome(*decided)
            elif dry_run:
                return outcome(Status.WOULD_UPLOAD)
            st.created_package |= site.ensure_package(owner, meta)
            st.created_release |= site.ensure_release(owner, meta)
            ticket = site.stage(owner, meta, sha256, labels)
            st.sent = True
            log.info("staged %s (attempt %d)", meta.basename, st.attempts)
            advance = progress.start(meta.basename, size)
            try:
                site.send_file(ticket, path, meta.basename, md5, size, advance)
            finally:
                progress.finish(meta.basename)
            site.commit(owner, meta, ticket)
            return outcome(Status.REPLACED if st.replaced else Status.UPLOADED)
        except ApiError as err:
            log.info("attempt %d for %s failed: %s", st.attempts, meta.basename, err)
            if err.kind is Failure.CONFLICT and st.attempts < retry.attempts:
                # The file appeared between our check and the stage (another uploader, or our own
                # earlier commit whose answer was lost): the next pass compares sha256.
                continue
            if not err.retryable or st.attempts >= retry.attempts:
                if not dry_run:
                    site.cleanup_empty(owner, meta, package=st.created_package, release=st.created_release)
                return outcome(Status.FAILED, _explain(err, owner, st.attempts))
            sleep(retry.delay(st.attempts))
            site.renew_session()


def _existing(
    site: AnacondaSite,
    owner: str,
    meta: AnacondaMeta,
    record: dict,
    sha256: str,
    md5: str,
    mode: Mode,
    st: _FileState,
    dry_run: bool,
) -> tuple[Status, str] | None:
    """Decide about a file that is already on the server; None means: go on and upload."""
    if _same_file(record, sha256, md5):
        if st.sent:
            return (
                Status.REPLACED if st.replaced else Status.UPLOADED,
                "commit confirmed by sha256 after a retry",
            )
        return (Status.EXISTS, "same sha256 already on the server")
    if mode.skip_existing:
        return (Status.SKIPPED, "a different file with this name is there (kept, --skip-existing)")
    if not mode.force:
        theirs = str(record.get("sha256") or record.get("md5") or "?")[:12]
        return (
            Status.REFUSED,
            f"a different file is on the server (sha256 {theirs}…); use --force to replace it",
        )
    if dry_run:
        return (Status.WOULD_REPLACE, "")
    site.remove_dist(owner, meta)
    st.replaced = True
    return None


def _explain(err: ApiError, owner: str, attempts: int) -> str:
    """One line a user can act on, per failure kind."""
    tail = f" (after {attempts} attempts)" if attempts > 1 else ""
    if err.kind is Failure.AUTH:
        return f"not authorized to upload to '{owner}': the token is invalid or lacks write access ({err})"
    if err.kind is Failure.QUOTA:
        return f"storage quota of '{owner}' exceeded, not retried ({err})"
    if err.kind is Failure.CONFLICT:
        return f"the server keeps reporting a conflict{tail} ({err})"
    return f"{err}{tail}"


def upload_to_anaconda(
    packages: Sequence[PackageInfo],
    owner: str,
    *,
    site_url: str,
    token: Token | None,
    labels: tuple[str, ...] = (),
    mode: Mode | None = None,
    retry: RetryPolicy | None = None,
    dry_run: bool = False,
    blocked: dict[Path, str] | None = None,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[FileOutcome]:
    """Upload packages (already ordered) to owner on an anaconda.org-compatible site."""
    mode = mode or Mode()
    retry = retry or RetryPolicy()
    blocked = blocked or {}
    if not owner or "/" in owner:
        raise UsageError(f"--channel {owner!r}: expected an anaconda.org user or organisation name")
    if token is None and not dry_run:
        raise EnvironmentProblem(
            "no anaconda.org token",
            "set ANACONDA_API_TOKEN, pass --token-file FILE (mode 600), or run `anaconda login`",
        )
    site = AnacondaSite(site_url, token)
    try:
        site.check_server()
        if token is not None:
            site.whoami()
        exists = site.owner_exists(owner)
    except ApiError as err:
        if err.kind is Failure.AUTH and token is not None:
            raise EnvironmentProblem(
                f"{site.site_url} rejected the {token}", "use a valid token with write access"
            ) from None
        raise EnvironmentProblem(
            f"cannot reach {site.site_url}: {err}", "check --site-url and the network"
        ) from None
    if not exists:
        raise UsageError(f"owner '{owner}' does not exist on {site.site_url}")
    outcomes: list[FileOutcome] = []
    for info in packages:
        if info.path in blocked:
            outcomes.append(not_attempted(info, owner, Status.BLOCKED, blocked[info.path]))
            continue
        try:
            meta = inspect_for_anaconda(info)
            outcomes.append(
                upload_one(
                    site, owner, meta, labels, mode, retry, dry_run=dry_run, progress=progress, sleep=sleep
                )
            )
        except OSError as exc:
            outcomes.append(
                not_attempted(info, owner, Status.FAILED, f"cannot read {info.path}: {exc.strerror}")
            )
        except PackageMetadataError as exc:
            detail = f"cannot read package metadata: {exc}"
            outcomes.append(not_attempted(info, owner, Status.FAILED, detail))
    return outcomes


# ---------------------------------------------------------------------------------------------
# Local channel


def upload_to_directory(
    packages: Sequence[PackageInfo],
    target: str,
    *,
    mode: Mode | None = None,
    dry_run: bool = False,
    blocked: dict[Path, str] | None = None,
) -> tuple[list[FileOutcome], IndexResult | None]:
    """Copy packages into a local channel (DIR or file://DIR) and re-index it."""
    mode = mode or Mode()
    blocked = blocked or {}
    channel_dir = channel_dir_from_target(target)
    if channel_dir.exists() and not channel_dir.is_dir():
        raise UsageError(f"--to {target}: not a directory")
    if not dry_run:
        channel_dir.mkdir(parents=True, exist_ok=True)
    ok = [p for p in packages if p.path not in blocked]
    done, index = publish_packages(
        channel_dir, ok, skip_existing=mode.skip_existing, force=mode.force, dry_run=dry_run
    )
    by_path = {o.path: o for o in done}
    outcomes: list[FileOutcome] = []
    for info in packages:
        if info.path in blocked:
            outcomes.append(not_attempted(info, str(channel_dir), Status.BLOCKED, blocked[info.path]))
        else:
            outcomes.append(by_path[info.path])
    return outcomes, index

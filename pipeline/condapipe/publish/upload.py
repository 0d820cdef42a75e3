"""Publish packages: verify, order, then upload each file to anaconda.org or a local channel.

Every file is handled on its own: one failure never stops the others, and the caller gets one
FileOutcome per file to print a summary and pick the exit code.

anaconda.org uploads converge on a flaky network:
- Every request (the start-up checks HEAD /, GET /user, GET /user/OWNER included) is retried on
  its own on 5xx, resets and timeouts ($CONDAPIPE_UPLOAD_TIMEOUT), --retries times with doubling
  --retry-delay; 401/403/404 and 402 are final. A "409 exists" at stage or "Invalid dist_id" at
  commit starts the file over from the existence check.
- A lost answer is settled by looking at the server before resending: a commit whose answer was
  lost is "uploaded" when GET /dist shows our sha256; a DELETE whose answer was lost counts once
  the old file is gone; creating a package/release again answers 409, which means "exists".
- Labels asked for (--label) on an identical file already there are added with
  POST /channels/OWNER/LABEL (binstar_client's add_channel) and confirmed by GET /dist; if they
  cannot be, the file is reported failed, never "already there" with labels it lacks.

--force. The protocol keys a file by its name and /stage refuses a name that exists (409), so the
new file cannot be staged beside the old one; the replacement is made safe instead:
  1. GET /dist: the old file's sha256 and labels.
  2. Download the old file (GET /download -> storage) into WORK_DIR/upload/replace/, check its
     sha256, and write a journal (old sha256 + labels, new sha256, backup path; temp + rename).
  3. DELETE /dist (re-checked with GET /dist when the answer is lost).
  4. package/release, stage, storage POST, commit of the new file, each retried.
  5. Committed: the journal and backup are removed; the status is "replaced".
  6. Failed for good after 3: the old file is uploaded again from the backup with its labels
     ("the previous file was restored"); if even that fails, the backup and journal stay.
A run killed anywhere leaves the journal: rerunning the same --force finishes it (the name is
empty or holds the old file: the new one goes up, reported "replaced"); any other upload run to
that owner puts the old file back ("restored"). So the server ends with the new file, or the old
one, never with neither once a run has finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from condapipe.bounded_json import loads_bounded
from condapipe.errors import CondapipeError, EnvironmentProblem, UsageError
from condapipe.hashing import hash_file
from condapipe.package.io import PackageInfo, read_package_info
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
from condapipe.publish.local_channel import (
    IndexResult,
    channel_dir_from_target,
    find_packages,
    publish_packages,
)
from condapipe.publish.tokens import Token, redact
from condapipe.publish.upload_order import upload_order
from condapipe.publish.upload_result import FileOutcome, Status
from condapipe.safe_paths import open_regular
from condapipe.scratch import scratch_dir
from condapipe.value_rules import (
    check_owner,
    is_label_name,
    is_owner_name,
    parse_url,
    refuse_url_credentials,
)

log = logging.getLogger("condapipe.publish.upload")
T = TypeVar("T")


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
    files = list(paths) if paths else (find_packages(output_dir) if output_dir.is_dir() else [])
    if not files:
        raise UsageError(
            f"nothing to upload: no .conda or .tar.bz2 package under {output_dir.absolute()} (--output-dir; "
            "its platform folders linux-64/, linux-aarch64/, noarch/); build first, e.g. "
            "`condapipe build magma`, or name the files: `condapipe upload ... FILE.conda`"
        )
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


def anaconda_client_site_url() -> str | None:
    """The `url` anaconda-client is configured with (`anaconda config --set url ...`), if any."""
    from binstar_client.utils.config import get_config

    try:
        url = get_config().get("url")
    except (OSError, ValueError, AttributeError, TypeError):  # unreadable, or YAML that is not a mapping
        return None
    return url if isinstance(url, str) and url else None


def resolve_site_url(flag: str | None, configured_upload: Mapping[str, Any]) -> str:
    """--site-url, then upload.site_url of the config file (the command's Settings.upload), then
    anaconda-client's url, then anaconda.org."""
    configured = configured_upload.get("site_url")
    if configured is not None and not isinstance(configured, str):
        raise UsageError("upload.site_url in the config file must be a string")
    url = flag or configured or anaconda_client_site_url() or DEFAULT_SITE_URL
    parts = parse_url(url.strip(), "the upload site URL")  # a bad host or port: one line, not a crash later
    refuse_url_credentials(
        parts, "the upload site URL", "give the token in $ANACONDA_API_TOKEN or --token-file"
    )
    try:
        return normalize_site_url(url)
    except ValueError:
        raise UsageError("the upload site URL is empty") from None


# ---------------------------------------------------------------------------------------------
# anaconda.org


def _retrying(
    site: AnacondaSite,
    retry: RetryPolicy,
    sleep: Callable[[float], None],
    func: Callable[[], T],
    *,
    acted: Callable[[], bool] | None = None,
    on_retry: Callable[[ApiError], None] | None = None,
) -> T | None:
    """One request, retried on its own on transient failures (5xx, reset, timeout) with backoff.

    `acted` re-checks the server before a resend: when the answer was lost after the server did
    the work (a commit, a DELETE), it returns True and the request is not sent again (result None).
    """
    tries = 0
    while True:
        tries += 1
        try:
            return func()
        except ApiError as err:
            if not err.retryable or tries >= retry.attempts:
                raise
            log.info("retrying after: %s", err)
            if on_retry is not None:
                on_retry(err)
            sleep(retry.delay(tries))
            site.renew_session()
            if acted is not None:
                try:
                    if acted():
                        return None
                except ApiError as check:
                    if not check.retryable:
                        raise
                    # unknown: the resend (or the next pass's check) settles it


@dataclass
class _Journal:
    """An interrupted-safe `--force`: what was on the server before we deleted it, and its backup.

    Written (temp + rename) before the DELETE, removed once the new file is committed or the old
    one is restored; a rerun finds it and finishes the replacement or restores the old file.
    """

    path: Path
    site: str
    owner: str
    basename: str
    old_sha256: str
    old_labels: list[str]
    new_sha256: str
    backup: Path

    @classmethod
    def location(cls, state_dir: Path, site: str, owner: str, basename: str) -> Path:
        key = hashlib.sha256(f"{site}\0{owner}\0{basename}".encode()).hexdigest()[:20]
        return state_dir / "replace" / f"{key}.json"

    @staticmethod
    def backup_path(path: Path, basename: str) -> Path:
        """Where the old file's backup lives: beside the journal, under the file's own name (a
        .conda needs it). Derived, never read from the journal, so an edited journal cannot point
        `discard` at another file."""
        name = basename.rsplit("/", 1)[-1]
        if name in ("", ".", "..") or "\0" in name:
            raise ValueError(f"not a package file name: {basename!r}")
        return path.with_suffix("") / name

    @classmethod
    def load(cls, path: Path) -> _Journal | None:
        """The journal at `path`, or None when it is not one condapipe wrote for its own name: not a
        regular file, too big or too deep, a field of the wrong form, or a file name that is not
        the one `location` gives for its own site, owner and basename (a planted or renamed file)."""
        try:
            if not stat.S_ISREG(path.lstat().st_mode) or _links_between(path.parent.parent, path.parent):
                return None
            with open_regular(path) as fh:
                data = loads_bounded(fh.read(_MAX_JOURNAL_BYTES + 1), max_bytes=_MAX_JOURNAL_BYTES)
            site, owner, basename = str(data["site"]), str(data["owner"]), str(data["basename"])
            labels = data["old_labels"]
            if not (
                _PACKAGE_BASENAME.fullmatch(basename)
                and is_owner_name(owner)
                and isinstance(labels, list)
                and all(isinstance(x, str) and is_label_name(x) for x in labels)
                and _SHA256.fullmatch(str(data["new_sha256"]))
                and (data["old_sha256"] == "" or _SHA256.fullmatch(str(data["old_sha256"])))
                and path.name == cls.location(path.parent.parent, site, owner, basename).name
            ):
                return None
            return cls(
                path,
                site,
                owner,
                basename,
                str(data["old_sha256"]),
                list(labels),
                str(data["new_sha256"]),
                cls.backup_path(path, basename),
            )
        except (OSError, ValueError, KeyError, TypeError, CondapipeError):
            return None

    def save(self) -> None:
        skip = ("path", "backup")  # the backup's place is derived from the journal's (backup_path)
        data = {k: v for k, v in vars(self).items() if k not in skip}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def discard(self) -> None:
        if _links_between(self.path.parent.parent, self.backup.parent):
            return  # a folder on the way was replaced by a link: delete nothing through it
        self.backup.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.backup.parent.rmdir()
        self.path.unlink(missing_ok=True)


_MAX_JOURNAL_BYTES = 64 << 10
_SHA256 = re.compile(r"[0-9a-f]{64}")
# SUBDIR/FILE of a conda package (CEP 26 subdirs); no '/' or leading '.' in FILE.
_PACKAGE_BASENAME = re.compile(
    r"(?:noarch|[a-z0-9]+-[a-z0-9]+)/[A-Za-z0-9_][A-Za-z0-9_.+!-]*\.(?:conda|tar\.bz2)"
)


def _links_between(top: Path, inner: Path) -> bool:
    """True when `inner` or a folder between it and `top` (both included) is a symbolic link."""
    here = inner
    while True:
        if here.is_symlink():
            return True
        if here == top or here.parent == here:
            return False
        here = here.parent


def check_state_dir(state_dir: Path) -> None:
    """The --force journal folder is a real folder: through a link, a discard could delete elsewhere."""
    replace = state_dir / "replace"
    for folder in (state_dir, replace):
        if folder.is_symlink():
            raise UsageError(
                f"{folder} is a symbolic link; condapipe keeps --force journals and backups only in a "
                "real folder: remove the link or choose another --work-dir"
            )


def pending_journals(state_dir: Path, site: str, owner: str) -> list[_Journal]:
    """Replacements a killed run left unfinished on this site and owner."""
    if _links_between(state_dir, state_dir / "replace"):
        return []
    found = (_Journal.load(p) for p in sorted((state_dir / "replace").glob("*.json")))
    return [j for j in found if j is not None and (j.site, j.owner) == (site, owner)]


@dataclass
class _FileState:
    attempts: int = 1
    sent: bool = False  # a stage succeeded at least once: a later "exists, same sha" is our commit
    replaced: bool = False  # the old file is gone because of us (this run or a killed earlier one)
    created_package: bool = False
    created_release: bool = False
    journal: _Journal | None = None
    started: float = field(default_factory=time.monotonic)


def _same_file(record: dict, sha256: str, md5: str = "") -> bool:
    """Compare the server's digest with ours (sha256 when the server reports it, else md5)."""
    if record.get("sha256"):
        return str(record["sha256"]).lower() == sha256
    if record.get("md5"):
        return str(record["md5"]).lower() == md5
    return False


@dataclass
class _Upload:
    """One file's upload: every request retried on its own, every lost answer settled by a re-check."""

    site: AnacondaSite
    owner: str
    meta: AnacondaMeta
    labels: tuple[str, ...]  # as the user gave them; () means the default label, main
    mode: Mode
    retry: RetryPolicy
    state_dir: Path
    dry_run: bool
    progress: Progress
    sleep: Callable[[float], None]
    sha256: str = ""
    md5: str = ""
    size: int = 0
    st: _FileState = field(default_factory=_FileState)

    def call(self, func: Callable[[], T], acted: Callable[[], bool] | None = None) -> T | None:
        def count(_err: ApiError) -> None:
            self.st.attempts += 1

        return _retrying(self.site, self.retry, self.sleep, func, acted=acted, on_retry=count)

    def find(self) -> dict | None:
        return self.call(lambda: self.site.find_dist(self.owner, self.meta))

    # -- one pass: look at the server, then do what is missing ---------------------------------

    def run_pass(self) -> tuple[Status, str]:
        record = self.find()
        journal = self.st.journal
        if record is not None:
            if _same_file(record, self.sha256, self.md5):
                if journal is not None and journal.new_sha256 == self.sha256:
                    self.st.replaced = True  # an interrupted --force of ours finished its commit
                    journal.discard()
                if self.st.sent or self.st.replaced:
                    return self._done("commit confirmed by sha256 after a retry" if self.st.sent else "")
                return self._labels_on_existing(record)
            if self.mode.skip_existing:
                return (Status.SKIPPED, "a different file with this name is there (kept, --skip-existing)")
            if not self.mode.force:
                theirs = str(record.get("sha256") or record.get("md5") or "?")[:12]
                return (
                    Status.REFUSED,
                    f"a different file is on the server (sha256 {theirs}…); use --force to replace it",
                )
            if self.dry_run:
                return (Status.WOULD_REPLACE, "")
            self._backup_and_delete(record)
        else:
            if journal is not None and journal.new_sha256 == self.sha256:
                self.st.replaced = True  # a killed --force deleted the old file; we finish it
            if self.dry_run:
                return (Status.WOULD_UPLOAD, "")
        self._send(self.meta, self.sha256, self.md5, self.size, self.labels or ("main",))
        return self._done("")

    def _done(self, detail: str) -> tuple[Status, str]:
        if self.st.journal is not None:
            self.st.journal.discard()
            self.st.journal = None
        return (Status.REPLACED if self.st.replaced else Status.UPLOADED, detail)

    def _send(self, meta: AnacondaMeta, sha256: str, md5: str, size: int, labels: tuple[str, ...]) -> None:
        """package/release → stage → storage POST → commit; a lost commit answer is settled by GET /dist."""
        site, owner = self.site, self.owner
        if not self.call(lambda: site.package_exists(owner, meta)):
            self.call(lambda: site.create_package(owner, meta))
            self.st.created_package = True
        if not self.call(lambda: site.release_exists(owner, meta)):
            self.call(lambda: site.create_release(owner, meta))
            self.st.created_release = True
        ticket = self.call(lambda: site.stage(owner, meta, sha256, labels))
        assert ticket is not None
        self.st.sent = True
        log.info("staged %s", meta.basename)

        def upload() -> None:
            advance = self.progress.start(meta.basename, size)
            try:
                site.send_file(ticket, meta.info.path, meta.basename, md5, size, advance)
            finally:
                self.progress.finish(meta.basename)

        def committed() -> bool:
            record = site.find_dist(owner, meta)
            return record is not None and _same_file(record, sha256, md5)

        self.call(upload)
        self.call(lambda: site.commit(owner, meta, ticket), acted=committed)

    # -- labels on a file that is already there --------------------------------------------------

    def _labels_on_existing(self, record: dict) -> tuple[Status, str]:
        have = [str(x) for x in record.get("labels") or []]
        wanted = [label for label in self.labels if label not in have]
        if not wanted:
            return (Status.EXISTS, "same sha256 already on the server")
        if self.dry_run:
            return (
                Status.EXISTS,
                f"same sha256 already on the server; would add label(s) {', '.join(wanted)}",
            )
        try:
            for label in wanted:
                self.call(partial(self.site.add_label, self.owner, self.meta, label))
            after = self.find() or {}
        except ApiError as err:
            raise ApiError(
                err.kind, f"the file is there, but label(s) {', '.join(wanted)} could not be added: {err}"
            ) from None
        missing = [label for label in wanted if "labels" in after and label not in after["labels"]]
        if missing:
            return (
                Status.FAILED,
                f"the file is there, but the server did not add label(s) {', '.join(missing)}",
            )
        return (Status.EXISTS, f"same sha256 already on the server; added label(s) {', '.join(wanted)}")

    # -- --force: keep the old file until the new one is committed, or put it back ----------------

    def _backup_and_delete(self, record: dict) -> None:
        old_sha = str(record.get("sha256") or "")
        journal = self.st.journal
        if journal is None or journal.old_sha256 != old_sha or not journal.backup.is_file():
            path = _Journal.location(self.state_dir, self.site.site_url, self.owner, self.meta.basename)
            journal = _Journal(
                path,
                self.site.site_url,
                self.owner,
                self.meta.basename,
                old_sha,
                [str(x) for x in record.get("labels") or ["main"]],
                self.sha256,
                _Journal.backup_path(path, self.meta.basename),
            )
            journal.backup.parent.mkdir(parents=True, exist_ok=True)
            if _links_between(self.state_dir, journal.backup.parent):
                raise ApiError(
                    Failure.CLIENT, f"{journal.backup.parent} is a symbolic link; not writing a backup there"
                )
            self.call(lambda: self.site.download_dist(self.owner, self.meta, journal.backup, old_sha))
        journal.new_sha256 = self.sha256
        journal.save()
        self.st.journal = journal

        def gone() -> bool:
            now = self.site.find_dist(self.owner, self.meta)
            return now is None or not _same_file(now, old_sha)

        self.st.replaced = True  # from here on a lost DELETE answer still means "replaced"
        try:
            self.call(lambda: self.site.remove_dist(self.owner, self.meta), acted=gone)
        except ApiError as err:
            if err.kind is not Failure.NOT_FOUND:  # 404: our earlier DELETE went through
                raise
        log.info("removed the old %s (backup %s)", self.meta.basename, journal.backup)

    def restore(self) -> str:
        """After a failed replacement: put the old file back from the backup; says what happened."""
        journal = self.st.journal
        if journal is None:
            return ""
        try:
            return restore_from_journal(self.site, journal, self.retry, self.sleep)
        except (ApiError, OSError, CondapipeError, PackageMetadataError) as err:
            return (
                f"; the previous file could not be restored yet ({err}); its copy is kept at "
                f"{journal.backup}: rerun the upload to finish"
            )


def restore_from_journal(
    site: AnacondaSite, journal: _Journal, retry: RetryPolicy, sleep: Callable[[float], None]
) -> str:
    """Upload the backed-up old file again, unless the name is taken (then there is nothing to undo).

    The backup is hashed before anything else reads it: only the very bytes that were on the server
    (the journal's old sha256) go up again."""
    if _links_between(journal.path.parent.parent, journal.backup) or not journal.backup.is_file():
        raise ApiError(Failure.CLIENT, f"the backup {journal.backup} is missing or not a regular file")
    digest = hash_file(journal.backup, md5=True)
    if digest.sha256 != journal.old_sha256:
        raise ApiError(Failure.CLIENT, f"the backup {journal.backup} does not match the old file's sha256")
    info = read_package_info(journal.backup)
    meta = inspect_for_anaconda(info)
    now = _retrying(site, retry, sleep, lambda: site.find_dist(journal.owner, meta))
    if now is not None:
        journal.discard()
        if _same_file(now, journal.old_sha256):
            return "; the previous file is still on the server"
        return "; the name is taken again on the server, nothing to restore"
    old = _Upload(
        site,
        journal.owner,
        meta,
        tuple(journal.old_labels),
        Mode(),
        retry,
        journal.path.parent,
        False,
        NoProgress(),
        sleep,
    )
    old.sha256, old.md5, old.size = digest.sha256, digest.md5 or "", digest.size
    old._send(meta, old.sha256, old.md5, old.size, tuple(journal.old_labels))
    journal.discard()
    return "; the previous file was restored"


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
    state_dir: Path | None = None,
) -> FileOutcome:
    """Publish one file to owner on site; never raises for per-file problems.

    Without state_dir the --force backups live in a temporary directory (not resumable)."""
    if state_dir is None:
        with scratch_dir("condapipe-upload-") as tmp:
            return upload_one(
                site,
                owner,
                meta,
                labels,
                mode,
                retry,
                dry_run=dry_run,
                progress=progress,
                sleep=sleep,
                state_dir=Path(tmp),
            )
    digest = hash_file(meta.info.path, md5=True)
    job = _Upload(site, owner, meta, labels, mode, retry, state_dir, dry_run, progress or NoProgress(), sleep)
    job.sha256, job.md5, job.size = digest.sha256, digest.md5 or "", digest.size
    st = job.st
    journal_path = _Journal.location(state_dir, site.site_url, owner, meta.basename)
    st.journal = None if dry_run else _Journal.load(journal_path)
    target = f"{site.site_url}/{owner}/{meta.basename}" + (f" [{', '.join(labels)}]" if labels else "")

    def outcome(status: Status, detail: str = "") -> FileOutcome:
        secs = time.monotonic() - st.started
        clean = redact(detail, [site.token])
        log.info("%s %s: %s %s", status.value, meta.basename, clean, f"(attempts: {st.attempts})")
        return FileOutcome(
            meta.info.path, meta.basename, target, status, job.sha256, job.size, clean, st.attempts, secs
        )

    passes = 0
    while True:
        passes += 1
        try:
            return outcome(*job.run_pass())
        except ApiError as err:
            log.info("pass %d for %s failed: %s", passes, meta.basename, err)
            if err.kind in (Failure.CONFLICT, Failure.STALE) and passes < retry.attempts:
                # The name was taken between our check and the stage, or the commit forgot our
                # stage (it may have been committed with the answer lost): look again.
                st.attempts += 1
                site.renew_session()
                continue
            detail = _explain(err, owner, st.attempts)
            if not dry_run:
                if st.journal is not None and st.replaced:
                    detail += job.restore()
                    st.replaced = False
                site.cleanup_empty(owner, meta, package=st.created_package, release=st.created_release)
            return outcome(Status.FAILED, detail)


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


def _start(
    site: AnacondaSite, token: Token | None, owner: str, retry: RetryPolicy, sleep: Callable[[float], None]
) -> None:
    """HEAD /, GET /user, GET /user/OWNER: each retried like any request; 401/403/404 are final."""
    attempts = [0]

    def count(_err: ApiError) -> None:
        attempts[0] += 1

    def call(func: Callable[[], T]) -> T | None:
        return _retrying(site, retry, sleep, func, on_retry=count)

    try:
        call(site.check_server)
        if token is not None:
            call(site.whoami)
        exists = call(lambda: site.owner_exists(owner))
    except ApiError as err:
        if err.kind is Failure.AUTH and token is not None:
            raise EnvironmentProblem(
                f"{site.site_url} rejected the {token}", "use a valid token with write access"
            ) from None
        if err.kind is Failure.NOT_FOUND:
            raise EnvironmentProblem(
                f"{site.site_url} is not an anaconda.org API ({err})", "check --site-url"
            ) from None
        tail = f" (after {attempts[0] + 1} attempts)" if attempts[0] else ""
        raise EnvironmentProblem(
            f"cannot reach {site.site_url}: {err}{tail}",
            "check --site-url and the network, or raise --retries",
        ) from None
    if not exists:
        raise UsageError(f"owner '{owner}' does not exist on {site.site_url}")


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
    state_dir: Path | None = None,
    timeout: float | None = None,
) -> list[FileOutcome]:
    """Upload packages (already ordered) to owner on an anaconda.org-compatible site.

    labels=() means the default label (main) for new files and leaves the labels of files already
    there alone; explicit labels are also added to an identical file already there. state_dir keeps
    the --force journal and backups (the CLI passes WORK_DIR/upload); timeout: seconds per request
    (the CLI passes its settings' CONDAPIPE_UPLOAD_TIMEOUT), None for anaconda_api's defaults."""
    mode = mode or Mode()
    retry = retry or RetryPolicy()
    blocked = blocked or {}
    check_owner(owner, "--channel")
    if state_dir is not None and not dry_run:
        check_state_dir(state_dir)  # before any request: a link there is refused, whatever the server says
    if dry_run:  # an offline preview: no request, no token (the real run compares with the server)
        return preview_anaconda(packages, owner, site_url=site_url, labels=labels, blocked=blocked)
    if token is None and not dry_run:
        raise EnvironmentProblem(
            "no anaconda.org token",
            "set ANACONDA_API_TOKEN, pass --token-file FILE (mode 600), or run `anaconda login`",
        )
    site = AnacondaSite(site_url, token, timeout=timeout)
    _start(site, token, owner, retry, sleep)
    with contextlib.ExitStack() as stack:
        if state_dir is None:
            state_dir = stack.enter_context(scratch_dir("condapipe-upload-"))
        outcomes: list[FileOutcome] = []
        for info in packages:
            if info.path in blocked:
                outcomes.append(not_attempted(info, owner, Status.BLOCKED, blocked[info.path]))
                continue
            try:
                meta = inspect_for_anaconda(info)
                outcomes.append(
                    upload_one(
                        site,
                        owner,
                        meta,
                        labels,
                        mode,
                        retry,
                        dry_run=dry_run,
                        progress=progress,
                        sleep=sleep,
                        state_dir=state_dir,
                    )
                )
            except OSError as exc:
                outcomes.append(
                    not_attempted(info, owner, Status.FAILED, f"cannot read {info.path}: {exc.strerror}")
                )
            except PackageMetadataError as exc:
                detail = f"cannot read package metadata: {exc}"
                outcomes.append(not_attempted(info, owner, Status.FAILED, detail))
        if not dry_run:
            done = {o.basename for o in outcomes}
            outcomes.extend(_finish_interrupted(site, owner, state_dir, retry, sleep, done))
    return outcomes


def _finish_interrupted(
    site: AnacondaSite,
    owner: str,
    state_dir: Path,
    retry: RetryPolicy,
    sleep: Callable[[float], None],
    skip: set[str],
) -> list[FileOutcome]:
    """A killed --force whose file this run did not upload again: put the old file back."""
    outcomes = []
    for journal in pending_journals(state_dir, site.site_url, owner):
        if journal.basename in skip:
            continue
        target = f"{site.site_url}/{owner}/{journal.basename}"
        size = journal.backup.stat().st_size if journal.backup.is_file() else 0
        try:
            detail = restore_from_journal(site, journal, retry, sleep).lstrip("; ")
            status = Status.RESTORED
        except (ApiError, OSError, CondapipeError, PackageMetadataError) as exc:
            detail = f"an interrupted --force left this file removed; restoring it failed: {exc}"
            status = Status.FAILED
        outcomes.append(
            FileOutcome(journal.backup, journal.basename, target, status, journal.old_sha256, size, detail)
        )
    return outcomes


def preview_anaconda(
    packages: Sequence[PackageInfo],
    owner: str,
    *,
    site_url: str,
    labels: tuple[str, ...] = (),
    blocked: dict[Path, str] | None = None,
) -> list[FileOutcome]:
    """`upload --dry-run`: what would go where, in upload order, with which labels; offline.

    No request is made and no token is needed, so the preview cannot say which files the server
    already has: the real run compares sha256 and reports already-there / refused per file.
    """
    blocked = blocked or {}
    base = f"{normalize_site_url(site_url)}/{owner}"
    tail = f" [{', '.join(labels or ('main',))}]"  # no --label: a new file gets main
    outcomes: list[FileOutcome] = []
    for info in packages:
        if info.path in blocked:
            outcomes.append(not_attempted(info, owner, Status.BLOCKED, blocked[info.path]))
            continue
        note = "offline preview: not compared with the server"
        outcomes.append(not_attempted(info, f"{base}/{info.basename}{tail}", Status.WOULD_UPLOAD, note))
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
    ok = [p for p in packages if p.path not in blocked]
    done: list[FileOutcome] = []
    index = None
    if ok:  # nothing passed verify: the destination is not created or touched
        if not dry_run:
            channel_dir.mkdir(parents=True, exist_ok=True)
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

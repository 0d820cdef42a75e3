"""The `--force` journal is read back from the work dir: what it says can never make condapipe
delete or read a file outside its own replace/ folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from condapipe.errors import UsageError
from condapipe.publish.upload import _Journal, check_state_dir, pending_journals

BASENAME = "linux-64/pkg-1.0-0.conda"


def _key(state: Path, basename: str = BASENAME) -> str:
    """The file name condapipe gives the journal of `basename` (a journal under another name is ignored)."""
    return _Journal.location(state, "https://api.example", "me", basename).name


def _write(state: Path, name: str, **fields: object) -> Path:
    data = {
        "site": "https://api.example",
        "owner": "me",
        "basename": "linux-64/pkg-1.0-0.conda",
        "old_sha256": "a" * 64,
        "old_labels": ["main"],
        "new_sha256": "b" * 64,
        **fields,
    }
    path = state / "replace" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_an_edited_backup_path_is_ignored_and_discard_stays_in_its_folder(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    key = _key(tmp_path / "state")
    _write(tmp_path / "state", key, backup=str(victim))
    (journal,) = pending_journals(tmp_path / "state", "https://api.example", "me")
    assert journal.backup == tmp_path / "state" / "replace" / key.removesuffix(".json") / "pkg-1.0-0.conda"
    journal.discard()
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "state" / "replace" / key).exists()


def test_a_journal_naming_no_file_or_not_a_regular_file_is_skipped(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _write(state, "dots.json", basename="linux-64/..")
    os.mkfifo(state / "replace" / "fifo.json")  # would hang a plain read
    assert pending_journals(state, "https://api.example", "me") == []


def test_a_saved_journal_loads_back_with_its_backup_beside_it(tmp_path: Path) -> None:
    path = _Journal.location(tmp_path, "https://api.example", "me", "linux-64/pkg-1.0-0.conda")
    backup = _Journal.backup_path(path, "linux-64/pkg-1.0-0.conda")
    journal = _Journal(path, "https://api.example", "me", BASENAME, "a" * 64, ["x"], "b" * 64, backup)
    journal.save()
    assert "backup" not in json.loads(path.read_text())
    assert _Journal.load(path) == journal


@pytest.mark.parametrize(
    "fields",
    [
        {"basename": "linux-64/../../../etc/passwd.conda"},
        {"basename": "../x/pkg-1.0-0.conda"},
        {"owner": "../admin"},
        {"owner": "me/../x"},
        {"old_sha256": "not-a-digest"},
        {"old_labels": ["main", "$(touch x)"]},
        {"old_labels": "main"},
    ],
)
def test_a_journal_with_a_field_of_the_wrong_form_is_ignored(tmp_path: Path, fields: dict) -> None:
    state = tmp_path / "state"
    _write(state, _key(state, str(fields.get("basename", BASENAME))), **fields)
    assert pending_journals(state, "https://api.example", str(fields.get("owner", "me"))) == []


def test_a_journal_under_a_name_condapipe_did_not_give_it_is_ignored(tmp_path: Path) -> None:
    _write(tmp_path / "state", "planted.json")
    assert pending_journals(tmp_path / "state", "https://api.example", "me") == []


def test_a_deeply_nested_or_huge_journal_is_ignored_and_never_stops_an_upload(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "replace").mkdir(parents=True)
    (state / "replace" / _key(state)).write_text("[" * 200_000 + "]" * 200_000)
    assert pending_journals(state, "https://api.example", "me") == []
    (state / "replace" / _key(state)).write_text('{"site": "' + "x" * (1 << 20) + '"}')
    assert pending_journals(state, "https://api.example", "me") == []


def test_a_symlinked_journal_folder_never_deletes_outside(tmp_path: Path) -> None:
    """A link in place of replace/ (or of a backup folder) is refused, and nothing is deleted through it."""
    state = tmp_path / "state"
    outside = tmp_path / "outside"
    key = _key(state)
    _write(outside, key)  # outside/replace/KEY.json and its backup beside it
    backup_dir = outside / "replace" / key.removesuffix(".json")
    backup_dir.mkdir()
    (backup_dir / "pkg-1.0-0.conda").write_text("someone else's file")
    state.mkdir()
    (state / "replace").symlink_to(outside / "replace")
    assert pending_journals(state, "https://api.example", "me") == []
    with pytest.raises(UsageError, match="symbolic link"):
        check_state_dir(state)
    # a real replace/ folder whose backup folder is a link: discard deletes the journal only
    (state / "replace").unlink()
    _write(state, key)
    (state / "replace" / key.removesuffix(".json")).symlink_to(backup_dir)
    (journal,) = pending_journals(state, "https://api.example", "me")
    journal.discard()
    assert (backup_dir / "pkg-1.0-0.conda").read_text() == "someone else's file"


class _NoSite:
    """Any use of the server fails the test: a hostile backup must be refused before any request."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the server was used ({name}) for an unverified backup")


def test_a_hostile_backup_is_never_uploaded_again(tmp_path: Path) -> None:
    from condapipe.publish.anaconda_api import ApiError
    from condapipe.publish.upload import RetryPolicy, restore_from_journal

    state = tmp_path / "state"
    _write(state, _key(state), old_sha256="c" * 64)
    (journal,) = pending_journals(state, "https://api.example", "me")
    journal.backup.parent.mkdir()
    journal.backup.write_bytes(b"PK\x03\x04 a package someone put here")
    with pytest.raises(ApiError, match="does not match the old file's sha256"):
        restore_from_journal(_NoSite(), journal, RetryPolicy(attempts=1), lambda _s: None)  # type: ignore[arg-type]
    assert journal.backup.exists() and journal.path.exists()  # kept for the user to look at

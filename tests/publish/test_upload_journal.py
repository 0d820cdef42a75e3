"""The `--force` journal is read back from the work dir: what it says can never make condapipe
delete or read a file outside its own replace/ folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

from condapipe.publish.upload import _Journal, pending_journals


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
    _write(tmp_path / "state", "k.json", backup=str(victim))
    (journal,) = pending_journals(tmp_path / "state", "https://api.example", "me")
    assert journal.backup == tmp_path / "state" / "replace" / "k" / "pkg-1.0-0.conda"
    journal.discard()
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "state" / "replace" / "k.json").exists()


def test_a_journal_naming_no_file_or_not_a_regular_file_is_skipped(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _write(state, "dots.json", basename="linux-64/..")
    os.mkfifo(state / "replace" / "fifo.json")  # would hang a plain read
    assert pending_journals(state, "https://api.example", "me") == []


def test_a_saved_journal_loads_back_with_its_backup_beside_it(tmp_path: Path) -> None:
    path = _Journal.location(tmp_path, "https://api.example", "me", "linux-64/pkg-1.0-0.conda")
    backup = _Journal.backup_path(path, "linux-64/pkg-1.0-0.conda")
    journal = _Journal(path, "https://api.example", "me", "linux-64/pkg-1.0-0.conda", "a", ["x"], "b", backup)
    journal.save()
    assert "backup" not in json.loads(path.read_text())
    assert _Journal.load(path) == journal

"""An interrupt at any instant leaves no scratch folder behind (issue 38, item 8; found by the
round-4 fuzz campaign: a SIGTERM to `verify` left `.condapipe-verify-*` in TMPDIR).

condapipe's handler raises KeyboardInterrupt wherever Python is, the `shutil.rmtree` of a cleanup
included; condapipe.scratch.remove_tree finishes the removal first and re-raises afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from condapipe.package.conda_writer import PackageFile, index_json, write_conda

CLI = [sys.executable, "-c", "from condapipe.cli.main import main; main()"]

_REMOVER = """
import os, signal, sys, threading, time
from pathlib import Path
import shutil
from condapipe.scratch import remove_tree

root = Path(sys.argv[1])
root.mkdir()
for i in range(200):
    (root / f"d{i}").mkdir()
    for j in range(100):
        (root / f"d{i}" / f"f{j}").write_bytes(b"x")
signal.signal(signal.SIGINT, signal.default_int_handler)
threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT)).start()
remove = remove_tree if sys.argv[2] == "remove_tree" else shutil.rmtree
try:
    remove(root)
    time.sleep(1)  # the signal, had it come after the removal
except KeyboardInterrupt:
    print("interrupted")
print("gone" if not root.exists() else "left")
"""


def test_an_interrupt_during_the_removal_is_raised_after_the_folder_is_gone(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _REMOVER, str(tmp_path / "tree"), "remove_tree"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.split() == ["interrupted", "gone"], done.stderr


def _many_files_package(out: Path) -> Path:
    files = [PackageFile(f"share/demo/f{i:05d}.txt", b"x\n") for i in range(6000)]
    index = index_json("demo", "1.0", "0", "noarch")
    return write_conda(out, index, files, {"summary": "many files", "license": ""})


def _files_under(folder: Path) -> int:
    return sum(len(files) for _root, _dirs, files in os.walk(folder))


def test_verify_stopped_while_it_removes_its_scratch_tree_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    """The SIGTERM is sent once the unpacked tree is shrinking: the cleanup is under way."""
    package = _many_files_package(tmp_path / "in")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = subprocess.Popen(
        [*CLI, "verify", str(package)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    most, sent = 0, False
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        count = _files_under(tmpdir)
        most = max(most, count)
        if most >= 6000 and count < most - 200:  # the removal has begun
            proc.send_signal(signal.SIGTERM)
            sent = True
            break
        time.sleep(0.002)
    _out, err = proc.communicate(timeout=300)
    assert sent, "verify ended before its cleanup could be caught under way"
    assert proc.returncode in (0, 130), err[-2000:]
    assert "Traceback" not in err
    assert list(tmpdir.iterdir()) == [], "the scratch tree was left behind"

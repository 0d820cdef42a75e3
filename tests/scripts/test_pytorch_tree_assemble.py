"""scripts/pytorch_tree/assemble.py: a PyTorch source tree from a Debian orig tarball and pinned mirrors.

Everything is built here, offline and small: an orig tarball shaped like Debian's (one top dir, empty
third_party/a and third_party/b, a .gitmodules naming them), real git mirrors laid out as
MIRRORS/<owner>+<name>/repo (bare, and one non-bare .../repo/.git), with a nested submodule
(third_party/a/deps/gamma), and a pins file for version 9.9.9. Each mirror also holds a commit newer
than the pinned one, so a tree built from the wrong commit shows.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pytorch_tree" / "assemble.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (apt-get install git)")


def _load():
    spec = importlib.util.spec_from_file_location("pytorch_tree_assemble", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


asm = _load()

VERSION = "9.9.9"
TOP = f"pytorch-v{VERSION}"
ORIG_NAME = f"pytorch_{VERSION}+dfsg.orig.tar.xz"
ORIG_MTIME = 1_600_000_000
ORIG_GITMODULES = (
    '[submodule "third_party/a"]\n\tpath = third_party/a\n\turl = https://github.com/acme/alpha.git\n'
    '[submodule "third_party/b"]\n\tpath = third_party/b\n\turl = https://github.com/acme/beta.git\n'
)
ALPHA_GITMODULES = (
    '[submodule "deps/gamma"]\n\tpath = deps/gamma\n\turl = https://github.com/acme/gamma.git\n'
)

_GIT_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00+00:00",
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=_GIT_ENV, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


class WorkRepo:
    """A git work tree whose commits the tests choose file by file (gitlinks through the index)."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True)
        self.path = path
        git(path, "init", "-q")

    def commit(
        self,
        files: dict[str, str],
        *,
        executable: tuple[str, ...] = (),
        symlinks: dict[str, str] | None = None,
        gitlinks: dict[str, str] | None = None,
    ) -> str:
        for rel, text in files.items():
            p = self.path / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            if rel in executable:
                p.chmod(0o755)
        for rel, target in (symlinks or {}).items():
            (self.path / rel).symlink_to(target)
        paths = [*files, *(symlinks or {})]
        if paths:
            git(self.path, "add", "--", *paths)
        for rel, sha in (gitlinks or {}).items():
            git(self.path, "update-index", "--add", "--cacheinfo", f"160000,{sha},{rel}")
        git(self.path, "commit", "-q", "-m", "commit")
        return git(self.path, "rev-parse", "HEAD")

    def mirror(self, mirrors: Path, repo: str, *, bare: bool = True) -> None:
        owner, name = repo.split("/")
        dest = mirrors / f"{owner}+{name}" / "repo"
        dest.parent.mkdir(parents=True)
        git(mirrors, "clone", "-q", *(["--bare"] if bare else []), str(self.path), str(dest))


def tar_member(
    name: str, data: bytes = b"", *, kind: bytes = tarfile.REGTYPE, linkname: str = "", mode: int = 0o644
) -> tuple[tarfile.TarInfo, bytes | None]:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mtime = ORIG_MTIME
    ti.mode = 0o755 if kind == tarfile.DIRTYPE else mode
    ti.linkname = linkname
    if kind == tarfile.CHRTYPE:
        ti.devmajor, ti.devminor = 1, 3
    if kind == tarfile.REGTYPE:
        ti.size = len(data)
        return ti, data
    return ti, None


def make_orig(
    path: Path,
    extra: list[tuple[tarfile.TarInfo, bytes | None]] | None = None,
    *,
    gitmodules: bool = True,
) -> Path:
    """A Debian-style +dfsg orig: one top dir, third_party submodule dirs present but empty."""
    dirtype = tarfile.DIRTYPE
    members = [
        tar_member(f"{TOP}", kind=dirtype),
        tar_member(f"{TOP}/setup.py", b"print('pytorch 9.9.9')\n"),
        tar_member(f"{TOP}/torch", kind=dirtype),
        tar_member(f"{TOP}/torch/__init__.py", b"__version__ = '9.9.9'\n"),
        tar_member(f"{TOP}/torch/alias.py", kind=tarfile.SYMTYPE, linkname="__init__.py"),
        tar_member(f"{TOP}/tools", kind=dirtype),
        tar_member(f"{TOP}/tools/build.sh", b"#!/bin/sh\necho build\n", mode=0o755),
        tar_member(f"{TOP}/third_party", kind=dirtype),
        tar_member(f"{TOP}/third_party/a", kind=dirtype),
        tar_member(f"{TOP}/third_party/b", kind=dirtype),
    ]
    if gitmodules:
        members.append(tar_member(f"{TOP}/.gitmodules", ORIG_GITMODULES.encode()))
    with tarfile.open(path, "w:xz") as tf:
        for ti, data in [*members, *(extra or [])]:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


@dataclass
class World:
    root: Path
    mirrors: Path
    debian_dir: Path
    orig: Path
    orig_sha256: str
    alpha: list[str]  # [pinned, newer]
    beta: list[str]
    gamma: list[str]
    beta_unmirrored: str  # a commit made upstream after the mirror was taken
    evil: str

    def submodules(self) -> list[dict[str, Any]]:
        return [
            {
                "path": "third_party/a",
                "url": "https://github.com/acme/alpha.git",
                "repo": "acme/alpha",
                "commit": self.alpha[0],
                "exclude": ["docs"],
                "confidence": "high",
            },
            {"path": "third_party/b", "repo": "acme/beta", "commit": self.beta[0]},
            {"path": "third_party/a/deps/gamma", "repo": "acme/gamma", "commit": self.gamma[0]},
        ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("world")
    mirrors = root / "mirrors"
    mirrors.mkdir()

    gamma = WorkRepo(root / "work" / "gamma")
    g = [gamma.commit({"gamma.h": "gamma v1\n"}), gamma.commit({"gamma.h": "gamma v2\n", "new.h": "new\n"})]

    alpha = WorkRepo(root / "work" / "alpha")
    a1 = alpha.commit(
        {
            "alpha.txt": "alpha v1\n",
            "bin/run.sh": "#!/bin/sh\necho alpha\n",
            "docs/manual.txt": "big docs Debian drops\n",
            ".gitmodules": ALPHA_GITMODULES,
        },
        executable=("bin/run.sh",),
        symlinks={"link.txt": "alpha.txt"},
        gitlinks={"deps/gamma": g[0]},
    )
    a2 = alpha.commit({"alpha.txt": "alpha v2\n", "only-in-newer.txt": "x\n"}, gitlinks={"deps/gamma": g[1]})

    beta = WorkRepo(root / "work" / "beta")
    b = [beta.commit({"src/beta.c": "int beta = 1;\n"}), beta.commit({"src/beta.c": "int beta = 2;\n"})]

    evil = WorkRepo(root / "work" / "evil")
    e = evil.commit({"ok.txt": "ok\n"}, symlinks={"escape": "../../../../outside"})

    alpha.mirror(mirrors, "acme/alpha")
    beta.mirror(mirrors, "acme/beta", bare=False)  # the .../repo/.git layout
    gamma.mirror(mirrors, "acme/gamma")
    evil.mirror(mirrors, "acme/evil")
    beta_unmirrored = beta.commit({"src/beta.c": "int beta = 3;\n"})

    debian_dir = root / "debian"
    debian_dir.mkdir()
    orig = make_orig(debian_dir / ORIG_NAME)
    return World(
        root=root,
        mirrors=mirrors,
        debian_dir=debian_dir,
        orig=orig,
        orig_sha256=hashlib.sha256(orig.read_bytes()).hexdigest(),
        alpha=[a1, a2],
        beta=b,
        gamma=g,
        beta_unmirrored=beta_unmirrored,
        evil=e,
    )


def pins_doc(
    world: World, submodules: list[dict[str, Any]] | None = None, skip: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "schema": 1,
        "versions": {
            VERSION: {
                "debian_source": f"pytorch={VERSION}+dfsg-1",
                "orig_tarball": ORIG_NAME,
                "orig_sha256": world.orig_sha256,
                "release_dir": TOP,
                "pins_status": "test pins",
                "submodules": world.submodules() if submodules is None else submodules,
                "skip": skip or [],
            }
        },
    }


@dataclass
class Run:
    rc: int
    out: str
    err: str
    dest: Path


Runner = Callable[..., Run]


@pytest.fixture(autouse=True)
def _no_source_date_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)


@pytest.fixture
def run(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Runner:
    """Call the script's main() in-process: run(doc=None, *flags, orig=None, dest=None) -> Run."""

    def _run(
        doc: dict[str, Any] | None = None, *flags: str, orig: Path | None = None, dest: Path | None = None
    ) -> Run:
        pins = tmp_path / "pins.json"
        pins.write_text(json.dumps(doc if doc is not None else pins_doc(world)))
        dest = dest or tmp_path / "trees" / "pytorch"
        argv = [
            "--version",
            VERSION,
            "--pins",
            str(pins),
            "--mirrors",
            str(world.mirrors),
            "--dest",
            str(dest),
        ]
        argv += ["--orig", str(orig or world.orig), *flags]
        capsys.readouterr()
        rc = asm.main(argv)
        cap = capsys.readouterr()
        return Run(rc, cap.out, cap.err, dest)

    return _run


def leftovers(dest: Path) -> list[str]:
    """What sits next to dest besides dest itself (a failed run must leave no dest.tmp-*)."""
    if not dest.parent.exists():
        return []
    return sorted(p.name for p in dest.parent.iterdir() if p.name != dest.name)


# --------------------------------------------------------------------------- the assembled tree


@pytest.mark.parametrize("pins_format", ["json", "yaml"])
def test_assembles_the_tree_from_the_pinned_commits(world: World, tmp_path: Path, pins_format: str) -> None:
    doc = pins_doc(world)
    pins = tmp_path / f"pins.{pins_format}"
    if pins_format == "yaml":
        yaml = pytest.importorskip("yaml")
        pins.write_text(yaml.safe_dump(doc))
    else:
        pins.write_text(json.dumps(doc))
    dest = tmp_path / "trees" / "pytorch"
    manifest = tmp_path / "manifest.json"
    proc = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--version", VERSION, "--pins", str(pins)),
            *("--debian-dir", str(world.debian_dir), "--mirrors", str(world.mirrors), "--dest", str(dest)),
            *("--manifest", str(manifest), "-v"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verification: OK (3 pins present in mirrors and non-empty, 0 skipped" in proc.stdout
    assert "symlinks, all resolving inside the tree" in proc.stdout

    # the orig tree, its top dir stripped
    assert (dest / "setup.py").read_text() == "print('pytorch 9.9.9')\n"
    assert os.readlink(dest / "torch" / "alias.py") == "__init__.py"
    assert os.access(dest / "tools" / "build.sh", os.X_OK)
    # the submodules at the pinned commits, not the mirrors' newer ones
    a = dest / "third_party" / "a"
    assert (a / "alpha.txt").read_text() == "alpha v1\n"
    assert not (a / "only-in-newer.txt").exists()
    assert os.readlink(a / "link.txt") == "alpha.txt"
    assert os.access(a / "bin" / "run.sh", os.X_OK)
    assert not (a / "docs").exists()  # excluded by the pin
    assert "excluded paths present in snapshot (dropped anyway): ['docs']" in proc.stdout
    assert (a / "deps" / "gamma" / "gamma.h").read_text() == "gamma v1\n"  # the nested pin
    assert not (a / "deps" / "gamma" / "new.h").exists()
    assert (dest / "third_party" / "b" / "src" / "beta.c").read_text() == "int beta = 1;\n"
    assert leftovers(dest) == []

    recorded = json.loads(manifest.read_text())
    assert recorded["version"] == VERSION
    assert {p["path"]: p["commit"] for p in recorded["pins"]} == {
        "third_party/a": world.alpha[0],
        "third_party/b": world.beta[0],
        "third_party/a/deps/gamma": world.gamma[0],
    }


def test_an_orig_without_gitmodules_takes_the_pins_as_the_submodule_list(
    world: World, tmp_path: Path, run: Runner
) -> None:
    orig = make_orig(tmp_path / "upstream-style.tar.xz", gitmodules=False)
    r = run(None, "--no-checksum", orig=orig)
    assert r.rc == 0, r.err
    assert "orig tree has no .gitmodules" in r.out
    assert "verification: OK" in r.out
    assert (r.dest / "third_party" / "b" / "src" / "beta.c").is_file()


# --------------------------------------------------------------------------- never overwrite or half-write


@pytest.mark.parametrize("kind", ["dir", "file", "dangling-symlink"])
def test_an_existing_dest_is_refused_and_left_untouched(tmp_path: Path, run: Runner, kind: str) -> None:
    dest = tmp_path / "trees" / "pytorch"
    dest.parent.mkdir()
    if kind == "dir":
        dest.mkdir()
        (dest / "mine.txt").write_text("keep me\n")
    elif kind == "file":
        dest.write_text("keep me\n")
    else:
        dest.symlink_to(tmp_path / "nowhere")
    r = run(dest=dest)
    assert r.rc == 1
    assert "refusing to overwrite existing" in r.err
    if kind == "dir":
        assert [p.name for p in dest.iterdir()] == ["mine.txt"]
        assert (dest / "mine.txt").read_text() == "keep me\n"
    elif kind == "file":
        assert dest.read_text() == "keep me\n"
    else:
        assert dest.is_symlink() and not (tmp_path / "nowhere").exists()
    assert leftovers(dest) == []


@pytest.mark.parametrize("case", ["commit-not-mirrored", "no-mirror"])
def test_a_pin_the_mirrors_cannot_supply_fails_before_anything_is_written(
    world: World, run: Runner, case: str
) -> None:
    subs = world.submodules()
    if case == "commit-not-mirrored":
        subs[1]["commit"] = world.beta_unmirrored
        expected = f"third_party/b: commit {world.beta_unmirrored} not in mirror acme/beta"
    else:
        subs[1]["repo"] = "acme/zeta"
        expected = "third_party/b: no mirror for acme/zeta"
    r = run(pins_doc(world, subs))
    assert r.rc == 1
    assert f"ERROR: {expected}" in r.err
    assert "preflight failed with 1 error(s); nothing written" in r.err
    assert not r.dest.parent.exists()  # not even the parent directory


def test_a_submodule_symlink_leaving_the_tree_fails_and_leaves_no_partial_dest(
    world: World, tmp_path: Path, run: Runner
) -> None:
    subs = world.submodules()
    subs[1].update(repo="acme/evil", commit=world.evil)
    r = run(pins_doc(world, subs))
    assert r.rc == 1
    assert "symlink leaves the tree: 'escape' -> '../../../../outside'" in r.err
    assert not r.dest.exists() and not r.dest.is_symlink()
    assert leftovers(r.dest) == []


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("dotdot", r"'\.\.' in archive member"),
        ("absolute", r"absolute member name|expected one top-level directory"),
        ("symlink-out", r"symlink leaves the tree"),
        ("symlink-absolute", r"absolute symlink"),
        ("file-through-symlink", r"symlink leaves the tree"),
        ("hardlink", r"refusing hard link"),
        ("device", r"refusing special file"),
    ],
)
def test_an_orig_member_escaping_the_tree_is_refused(
    tmp_path: Path, run: Runner, case: str, message: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    pwned = b"pwned\n"
    bad = {
        "dotdot": [tar_member(f"{TOP}/../../../outside/evil", pwned)],
        "absolute": [tar_member(str(outside / "evil"), pwned)],
        "symlink-out": [
            tar_member(f"{TOP}/third_party/x", kind=tarfile.SYMTYPE, linkname="../../../outside")
        ],
        "symlink-absolute": [tar_member(f"{TOP}/x", kind=tarfile.SYMTYPE, linkname=str(outside))],
        "file-through-symlink": [
            tar_member(f"{TOP}/x", kind=tarfile.SYMTYPE, linkname="../../outside"),
            tar_member(f"{TOP}/x/evil", pwned),
        ],
        "hardlink": [tar_member(f"{TOP}/x", kind=tarfile.LNKTYPE, linkname="/etc/passwd")],
        "device": [tar_member(f"{TOP}/x", kind=tarfile.CHRTYPE)],
    }[case]
    orig = make_orig(tmp_path / "bad.tar.xz", bad)
    r = run(None, "--no-checksum", orig=orig)
    assert r.rc == 1
    assert "error: " in r.err
    assert re.search(message, r.err), r.err
    assert list(outside.iterdir()) == []
    assert not r.dest.exists() and not r.dest.is_symlink()
    assert leftovers(r.dest) == []
    assert not [p for p in tmp_path.rglob("evil") if p.parent != outside]


def test_the_orig_checksum_is_checked_unless_told_not_to(world: World, tmp_path: Path, run: Runner) -> None:
    other = make_orig(tmp_path / "other.tar.xz", [tar_member(f"{TOP}/extra.txt", b"extra\n")])
    r = run(orig=other)
    assert r.rc == 1
    assert f"!= pinned {world.orig_sha256}" in r.err
    assert not r.dest.parent.exists()
    r = run(None, "--no-checksum", orig=other)
    assert r.rc == 0, r.err
    assert (r.dest / "extra.txt").read_text() == "extra\n"


# --------------------------------------------------------------------------- verification


def test_a_submodule_left_empty_fails_verification(world: World, run: Runner) -> None:
    subs = [s for s in world.submodules() if s["path"] != "third_party/b"]
    r = run(pins_doc(world, subs))
    assert r.rc == 1
    assert "ERROR: submodule path empty after assembly: third_party/b" in r.err
    assert "ERROR: .gitmodules path third_party/b is neither pinned nor skipped" in r.err
    assert "verification failed with 2 error(s)" in r.err
    assert not r.dest.exists()
    assert leftovers(r.dest) == []


def test_a_skipped_submodule_may_stay_empty_and_is_reported(world: World, run: Runner) -> None:
    subs = [s for s in world.submodules() if s["path"] != "third_party/b"]
    r = run(pins_doc(world, subs, skip=[{"path": "third_party/b", "reason": "not needed here"}]))
    assert r.rc == 0, r.err
    assert "note: third_party/b: left empty (not needed here)" in r.out
    assert "verification: OK (2 pins present in mirrors and non-empty, 1 skipped" in r.out
    assert list((r.dest / "third_party" / "b").iterdir()) == []


def test_a_nested_pin_must_match_its_parents_gitlink(world: World, run: Runner) -> None:
    subs = world.submodules()
    subs[2]["commit"] = world.gamma[1]  # the newer gamma, not the one alpha's pinned commit points at
    r = run(pins_doc(world, subs))
    assert r.rc == 1
    assert (
        f"ERROR: third_party/a/deps/gamma: pinned {world.gamma[1][:12]} "
        f"but parent's gitlink is {world.gamma[0][:12]}"
    ) in r.err
    assert not r.dest.parent.exists()

    subs[2]["confidence"] = "substitute"  # a deliberate substitute is allowed, loudly
    r = run(pins_doc(world, subs))
    assert r.rc == 0, r.err
    assert f"WARNING: third_party/a/deps/gamma: SUBSTITUTE {world.gamma[1][:12]}" in r.out
    assert (r.dest / "third_party" / "a" / "deps" / "gamma" / "new.h").is_file()


def test_a_parents_gitlink_must_be_pinned_or_skipped(world: World, run: Runner) -> None:
    subs = world.submodules()[:2]
    r = run(pins_doc(world, subs))
    assert r.rc == 1
    assert f"third_party/a/deps/gamma: gitlink {world.gamma[0][:12]} of acme/alpha is neither pinned" in r.err

    r = run(pins_doc(world, subs, skip=[{"path": "third_party/a/deps/gamma", "reason": "tests only"}]))
    assert r.rc == 0, r.err
    assert "note: third_party/a/deps/gamma: left empty (tests only)" in r.out
    assert list((r.dest / "third_party" / "a" / "deps" / "gamma").iterdir()) == []


# --------------------------------------------------------------------------- release-style tarball


def _tarball_run(run: Runner, tmp_path: Path, name: str) -> Path:
    out = tmp_path / "release" / name / f"{TOP}.tar.gz"  # its folder does not exist yet
    r = run(None, "--tarball", str(out), dest=tmp_path / "trees" / name)
    assert r.rc == 0, r.err
    assert f"tarball: {out}" in r.out
    return out


def test_the_tarball_is_release_style_and_reproducible(
    tmp_path: Path, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _tarball_run(run, tmp_path, "one")
    with tarfile.open(first, "r:gz") as tf:
        members = {m.name: m for m in tf.getmembers()}
        assert {name.split("/")[0] for name in members} == {TOP}
        assert members[TOP].isdir()
        got = tf.extractfile(members[f"{TOP}/third_party/a/alpha.txt"])
        assert got is not None and got.read() == b"alpha v1\n"
        got = tf.extractfile(members[f"{TOP}/third_party/a/deps/gamma/gamma.h"])
        assert got is not None and got.read() == b"gamma v1\n"
        assert f"{TOP}/third_party/b/src/beta.c" in members
        assert members[f"{TOP}/torch/alias.py"].issym()
        assert members[f"{TOP}/tools/build.sh"].mode == 0o755
        assert members[f"{TOP}/setup.py"].mode == 0o644
        assert {(m.uid, m.gid, m.uname, m.gname) for m in members.values()} == {(0, 0, "", "")}
        assert {m.mtime for m in members.values()} == {ORIG_MTIME}  # the orig's newest mtime
    assert stat.S_IMODE(first.stat().st_mode) == 0o644
    assert _tarball_run(run, tmp_path, "two").read_bytes() == first.read_bytes()

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    with tarfile.open(_tarball_run(run, tmp_path, "three"), "r:gz") as tf:
        assert {m.mtime for m in tf.getmembers()} == {1_700_000_000}


# --------------------------------------------------------------------------- the pins file


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"commit": "abc123"}, "commit must be a full 40-hex sha"),
        ({"path": "../escape"}, "unsafe relative path in pins: '../escape'"),
        ({"path": "/abs"}, "unsafe relative path in pins: '/abs'"),
        ({"exclude": ["docs/../.."]}, "unsafe relative path in pins"),
        ({"path": "third_party/b"}, "duplicate pin for third_party/b"),
    ],
)
def test_a_malformed_pins_file_is_refused(
    world: World, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    subs = world.submodules()
    subs[0].update(change)
    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps(pins_doc(world, subs)))
    with pytest.raises(asm.AssemblyError, match=re.escape(message)):
        asm.load_pins(pins, VERSION)
    with pytest.raises(asm.AssemblyError, match=r"no pins for version 0\.0\.1 \(have: 9\.9\.9\)"):
        asm.load_pins(pins, "0.0.1")


def test_the_shipped_pins_file_loads() -> None:
    yaml = pytest.importorskip("yaml")
    versions = yaml.safe_load(asm.DEFAULT_PINS.read_text())["versions"]
    assert versions
    for version in versions:
        vp = asm.load_pins(asm.DEFAULT_PINS, version)
        assert vp.release_dir == f"pytorch-v{version}"
        assert vp.pins and vp.orig_tarball.endswith(".orig.tar.xz")
        paths = [p.path for p in vp.pins]
        assert not set(paths) & set(vp.skip)
        # parents come before their nested pins (the export order relies on it)
        for i, p in enumerate(paths):
            assert not any(q.startswith(p + "/") for q in paths[:i])


@pytest.mark.parametrize("kind", ["file", "dangling-symlink"])
def test_an_existing_tarball_is_refused_before_anything_is_written(
    tmp_path: Path, run: Runner, kind: str
) -> None:
    out = tmp_path / f"{TOP}.tar.gz"
    if kind == "file":
        out.write_bytes(b"not yours\n")
    else:
        out.symlink_to(tmp_path / "nowhere.tar.gz")
    r = run(None, "--tarball", str(out))
    assert r.rc == 1
    assert "refusing to overwrite existing tarball" in r.err
    assert not r.dest.exists() and not r.dest.parent.exists()
    if kind == "file":
        assert out.read_bytes() == b"not yours\n"
    else:
        assert out.is_symlink() and not (tmp_path / "nowhere.tar.gz").exists()

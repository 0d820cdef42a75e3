"""Fuzz cases of issue 25 (hostile input, round 3): generated workflows, secrets, output paths, upload
journals, the build-tool channel and source archives.

Every hostile value tries to run `touch PWNED…`: a file of that name anywhere in the sandbox is an
injection, whether condapipe itself ran it or a `run:` line of a workflow it wrote did (each emitted
run line is run under bash, with recording stand-ins for `condapipe` and `python`). Every secret is
CANARY: it must appear in no output and in no file the command wrote.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from ruamel.yaml import YAML

from fuzz.case import CANARY, Case

HOSTILE = [
    "$(touch PWNED1)",
    "`touch PWNED2`",
    "x;touch PWNED3",
    "x' ; touch PWNED4 ; '",
    'x" ; touch PWNED5 ; "',
    "x && touch PWNED6",
    "x | touch PWNED7",
    "x\ntouch PWNED8",
    "x\rtouch PWNED9",
    "${{ github.token }}",
    "$HOME",
    "-x",
    "",
    "a" * 300,
    "\u2603",
    "x > PWNED10",
]
GOOD_OWNERS = ["my-org", "My_Org.2", "_x", "a" * 128]
GOOD_CHANNELS = ["conda-forge", "pytorch/label/nightly", "https://example.org/c", "./local", "file:///tmp/c"]
CACHES = [
    "redis://[::1",
    "redis://h:1",
    "redis://h:99999",
    "s3://bucket/prefix",
    "ftp://x",
    "redis://",
    "./$(touch PWNED11)",
    f"redis://u:{CANARY}@h:1",
    f"redis://:{CANARY}@h",
    "redis://" + "a" * 64 + ".example:1",
]
SITES = [
    "http://[::1",
    "http://" + "a" * 64 + ".com",
    "https://" + ".".join(["a"] * 200),
    "http://h:99999",
    "http://h:abc",
    "http://",
    "http://\u2603.com",
    "http://h/x\ny",
    f"http://user:{CANARY}@host",
    f"http://{CANARY}@host",
    "ftp://h",
    "http://127.0.0.1:9",
]
VERSIONS = ["1" * 5000, "9" * 65, "2.6.1", "x" * 100, "1." * 2000]
SECRET_NAMES = [
    "SCCACHE_REDIS_PASSWORD",
    "AWS_SECRET_ACCESS_KEY",
    "MY_TOKEN",
    "DB_PASSWORD",
    "X_SECRET",
    "GH_TOKEN",
]
MAGMA = ["magma", "--cuda", "12.4"]


def _hostile(rng: random.Random) -> str:
    return rng.choice(HOSTILE)


def _files(**files: bytes | str) -> Callable[[Path, Path], None]:
    def setup(work: Path, fixtures: Path) -> None:
        for name, data in files.items():
            target = work / name.replace("__", "/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data.encode() if isinstance(data, str) else data)

    return setup


def emit_case(rng: random.Random) -> Case:
    """`plan --emit` with hostile values in every flag that reaches a workflow, and hostile -o targets."""
    package = rng.choice(["magma", "cuda-smoke", "pytorch"])
    argv = ["plan", package]
    argv += {
        "magma": ["--cuda", "12.4"],
        "cuda-smoke": ["--cuda", "13.0"],
        "pytorch": ["--version", "2.4.1"],
    }[package]
    source_dir = None
    if rng.random() < 0.5:
        return _accepted_emit_case(rng, argv)
    for _ in range(rng.randint(1, 4)):
        flag = rng.choice(
            ["-c", "--upload-channel", "--compile-cache", "--env", "--source", "--install", "--runs-on"]
        )
        if flag == "-c":
            value = rng.choice([*GOOD_CHANNELS, _hostile(rng), "./" + _hostile(rng)])
        elif flag == "--upload-channel":
            value = rng.choice([*GOOD_OWNERS, _hostile(rng)])
        elif flag == "--compile-cache":
            value = rng.choice(CACHES)
        elif flag == "--env":
            value = f"A{rng.randint(0, 9)}={_hostile(rng)}"
        elif flag == "--source":
            source_dir = "src " + rng.choice(HOSTILE[:7]).replace("/", "_")
            value = source_dir
        elif flag == "--install":
            value = rng.choice(["condapipe", "condapipe @ file:///w/" + _hostile(rng), _hostile(rng)])
        else:
            value = _hostile(rng)
        argv += [flag, value]
    if rng.random() < 0.2:
        argv += ["--version", rng.choice(VERSIONS)]
    fmt = "github-actions" if rng.random() < 0.75 else "json"
    argv += ["--emit", fmt]
    target = rng.choice(
        ["-", "-", "wf.yml", "", "fifo", "condapipe.toml", "folder", "/dev/null", "existing.yml"]
    )
    if target != "-":
        argv += ["-o", target]
        if rng.random() < 0.4:
            argv.append("--force")

    def setup(work: Path, fixtures: Path) -> None:
        (work / "existing.yml").write_text("mine: true\n")
        (work / "condapipe.toml").write_text("# the user's config\n")
        (work / "folder").mkdir()
        os.mkfifo(work / "fifo")
        if source_dir:
            (work / source_dir).mkdir()

    workflow = None
    if fmt == "github-actions" and target in ("-", "wf.yml", "existing.yml"):
        workflow = target
    return Case(
        argv,
        setup,
        inputs=("existing.yml",),
        protected=("condapipe.toml",),
        workflow=workflow,
        canary=CANARY in " ".join(argv),
        label=f"emit:{fmt}:{target}",
    )


SHELL_ONLY = [v for v in HOSTILE if v and "\n" not in v and "\r" not in v and "${{" not in v]


def _accepted_emit_case(rng: random.Random, argv: list[str]) -> Case:
    """Hostile shell text only where the CLI accepts it (env values, folder names, pip URLs): the
    workflow is written, and its run lines must run none of it."""
    source = "src " + rng.choice(SHELL_ONLY[:7]).replace("/", "_")
    argv = [
        *argv,
        "--source",
        source,
        "--env",
        f"A={rng.choice(SHELL_ONLY)}",
        "-c",
        "./" + rng.choice(SHELL_ONLY),
    ]
    argv += ["--install", "condapipe @ file:///w/" + rng.choice(SHELL_ONLY[:7]), "--upload-channel", "my-org"]
    argv += ["--runs-on", rng.choice(SHELL_ONLY), "--emit", "github-actions"]
    target = rng.choice(["-", "wf.yml"])
    if target != "-":
        argv += ["-o", target]

    def setup(work: Path, fixtures: Path) -> None:
        (work / source).mkdir()
        (work / "condapipe.toml").write_text("# the user's config\n")

    return Case(argv, setup, protected=("condapipe.toml",), workflow=target, label=f"emit:accepted:{target}")


def secret_case(rng: random.Random) -> Case:
    """A canary secret in a config file, a flag or a URL, and a command that could print it."""
    name = rng.choice(SECRET_NAMES)
    way = rng.choice(
        ["config-env", "config-env-url", "config-package-env", "config-cache", "config-site", "flag"]
    )
    config = 'package = "magma"\ncuda = "12.4"\n'
    flags: list[str] = []
    if way == "config-env":
        config += f'[env]\n{name} = "{CANARY}"\n'
    elif way == "config-env-url":
        config += f'[env]\nSCCACHE_REDIS_ENDPOINT = "redis://u:{CANARY}@h:1"\n'
    elif way == "config-package-env":
        config += f'[packages.magma.env]\n{name} = "{CANARY}"\n'
    elif way == "config-cache":
        config += f'compile_cache = "redis://u:{CANARY}@h:1"\n'
    elif way == "config-site":
        config += f'[upload]\nsite_url = "https://u:{CANARY}@api.example.org"\n'
    else:
        flags = rng.choice(
            [
                ["--env", f"{name}={CANARY}"],
                ["--env", f"URL=https://u:{CANARY}@h/x"],
                ["--compile-cache", f"redis://u:{CANARY}@h:1"],
                ["-c", f"https://u:{CANARY}@h/chan"],
                ["-c", f"https://conda.anaconda.org/t/{CANARY}/chan"],
            ]
        )
    command = rng.choice(
        [
            ["config", "show"],
            ["render", *MAGMA, "-o", "out"],
            ["build", *MAGMA, "--dry-run"],
            ["plan", *MAGMA],
            ["plan", *MAGMA, "--emit", "github-actions"],
            ["plan", *MAGMA, "--emit", "json", "-o", "wf.json"],
            ["doctor", *MAGMA],
            ["upload", "--channel", "o", "--dry-run", "x.conda"],
        ]
    )
    argv = list(command)
    if flags and command[0] in ("render", "build", "plan", "doctor"):
        if flags[0] == "-c" and command[0] in ("render", "doctor"):
            flags = ["--env", f"{name}={CANARY}"]
        if flags[0] == "--compile-cache" and command[0] in ("render", "doctor"):
            flags = ["--env", f"URL=redis://u:{CANARY}@h:1"]
        argv += flags
    elif flags and command[0] == "upload":
        argv += ["--site-url", f"http://u:{CANARY}@h"]
    if rng.random() < 0.3:
        argv.append("--json")
    return Case(
        argv,
        _files(**{"condapipe.toml": config, "x.conda": b""}),
        canary=True,
        canary_sources=("condapipe.toml",),
        protected=("condapipe.toml",),
        label=f"secret:{way}:{command[0]}",
    )


def url_case(rng: random.Random) -> Case:
    """Site URLs, owners, labels and caches that used to end in internal errors."""
    argv = rng.choice(
        [
            ["upload", "--channel", "o", "--site-url", rng.choice(SITES), "--retries", "1", "x.conda"],
            [
                "upload",
                "--channel",
                rng.choice([*GOOD_OWNERS, _hostile(rng), "../admin"]),
                "--dry-run",
                "x.conda",
            ],
            ["upload", "--channel", "o", "--label", _hostile(rng), "--dry-run", "x.conda"],
            ["build", *MAGMA, "--dry-run", "--compile-cache", rng.choice(CACHES)],
            ["build", "magma", "--version", rng.choice(VERSIONS), "--dry-run"],
            ["build", *MAGMA, "--dry-run", "-c", rng.choice([*GOOD_CHANNELS, _hostile(rng)])],
            ["render", "magma", "--version", rng.choice(VERSIONS), "-o", "out"],
        ]
    )
    if rng.random() < 0.3:
        argv.append("--json")
    return Case(argv, _files(**{"x.conda": b""}), canary=CANARY in " ".join(argv), label=f"url:{argv[0]}")


def _journal_key(site: str, owner: str, basename: str) -> str:
    import hashlib

    return hashlib.sha256(f"{site}\0{owner}\0{basename}".encode()).hexdigest()[:20]


def journal_case(rng: random.Random) -> Case:
    """Hostile --force journals under the work dir: deep JSON, `../` names, links to outside."""
    site, owner = "http://127.0.0.1:9", "o"
    kind = rng.choice(
        ["deep", "dotdot", "link-replace", "link-upload", "link-backup", "huge", "fifo", "garbage"]
    )
    base = "linux-64/demo-1.0-0.conda"
    key = _journal_key(site, owner, base)

    def setup(work: Path, fixtures: Path) -> None:
        shutil_copy(fixtures, work)
        (work / "tok").write_text("tok-123\n")
        (work / "tok").chmod(0o600)
        upload = work / ".condapipe" / "upload"
        replace = upload / "replace"
        outside = work.parent / "outside"
        if kind == "link-upload":
            (work / ".condapipe").mkdir()
            upload.symlink_to(outside)
            return
        if kind == "link-replace":
            upload.mkdir(parents=True)
            replace.symlink_to(outside)
            return
        replace.mkdir(parents=True)
        record = {
            "site": site,
            "owner": owner,
            "basename": base,
            "old_sha256": "a" * 64,
            "old_labels": ["main"],
            "new_sha256": "b" * 64,
        }
        if kind == "deep":
            (replace / f"{key}.json").write_text("[" * 100_000 + "]" * 100_000)
        elif kind == "dotdot":
            record["basename"] = "linux-64/../../../outside/precious.txt"
            (replace / f"{_journal_key(site, owner, str(record['basename']))}.json").write_text(
                json.dumps(record)
            )
        elif kind == "link-backup":
            (replace / f"{key}.json").write_text(json.dumps(record))
            (replace / key).symlink_to(outside)
        elif kind == "huge":
            (replace / f"{key}.json").write_text('{"site": "' + "x" * (2 << 20) + '"}')
        elif kind == "fifo":
            os.mkfifo(replace / f"{key}.json")
        else:
            (replace / f"{key}.json").write_bytes(b"\xff\xfe{garbage")

    argv = ["upload", "--channel", owner, "--site-url", site, "--token-file", "tok", "--retries", "1"]
    argv += ["--retry-delay", "0", rng.choice(["--force", "--skip-existing"]), "demo-1.0-0.conda"]
    return Case(argv, setup, inputs=("demo-1.0-0.conda",), label=f"journal:{kind}")


def shutil_copy(fixtures: Path, work: Path) -> None:
    src = fixtures / "clean.conda" / "demo-1.0-0.conda"
    (work / "demo-1.0-0.conda").write_bytes(src.read_bytes())


def tool_case(rng: random.Random) -> Case:
    """--build-tools wheels with a package or variant that is not valid: no tool channel is made."""
    argv = ["build", rng.choice(["nosuch", "../x", "magma/..", "Magma", _hostile(rng)])]
    if rng.random() < 0.5:
        argv = ["build", *MAGMA, "--variant", rng.choice(["nope", _hostile(rng), "magma-cuda124"])]
    argv += ["--build-tools", "wheels", "--work-dir", "w"]
    return Case(argv, absent=("w/tool-channel",), label="tools")


SOURCE_KINDS = ("abs-link", "escape-link", "abs-member", "dotdot-member", "chardev", "fifo", "abs-hardlink")
SOURCE_KINDS += ("bomb", "many", "zip-abs-link", "zip-bomb", "not-an-archive", "truncated", "good")


def build_sources(fixtures: Path) -> None:
    """One source archive of each SOURCE_KINDS under fixtures/sources/ (built once per campaign)."""
    out = fixtures / "sources"
    if out.is_dir():
        return
    out.mkdir(parents=True)

    def tar(name: str, members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> None:
        with tarfile.open(out / name, "w:gz") as t:
            for m in members:
                payload = (data or {}).get(m.name)
                if payload is not None:
                    m.size = len(payload)
                t.addfile(m, io.BytesIO(payload) if payload is not None else None)

    def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
        m = tarfile.TarInfo(name)
        m.type, m.linkname, m.mode = kind, link, 0o644
        return m

    top = member("magma-2.6.1", tarfile.DIRTYPE)
    tar("abs-link.tar.gz", [top, member("magma-2.6.1/passwd", tarfile.SYMTYPE, "/etc/passwd")])
    tar("escape-link.tar.gz", [top, member("magma-2.6.1/up", tarfile.SYMTYPE, "../../../../outside")])
    tar("abs-member.tar.gz", [member("/tmp/PWNED-abs")], {"/tmp/PWNED-abs": b"x"})
    tar("dotdot-member.tar.gz", [member("../../outside/precious.txt")], {"../../outside/precious.txt": b"x"})
    tar("chardev.tar.gz", [top, member("magma-2.6.1/null", tarfile.CHRTYPE)])
    tar("fifo.tar.gz", [top, member("magma-2.6.1/fifo", tarfile.FIFOTYPE)])
    tar("abs-hardlink.tar.gz", [top, member("magma-2.6.1/hl", tarfile.LNKTYPE, "/etc/passwd")])
    tar("bomb.tar.gz", [member("magma-2.6.1/zeros")], {"magma-2.6.1/zeros": bytes(96 << 20)})
    tar("many.tar.gz", [member(f"magma-2.6.1/f{i}") for i in range(2500)])
    tar("good.tar.gz", [top, member("magma-2.6.1/CMakeLists.txt")], {"magma-2.6.1/CMakeLists.txt": b"# x\n"})
    with zipfile.ZipFile(out / "zip-abs-link.zip", "w") as zf:
        info = zipfile.ZipInfo("magma-2.6.1/passwd")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "/etc/passwd")
    with zipfile.ZipFile(out / "zip-bomb.zip", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("magma-2.6.1/zeros", bytes(96 << 20))
    (out / "not-an-archive.tar.gz").write_bytes(b"not gzip at all")
    good = (out / "good.tar.gz").read_bytes()
    (out / "truncated.tar.gz").write_bytes(good[: len(good) // 2])


def source_case(rng: random.Random) -> Case:
    kind = rng.choice(SOURCE_KINDS)
    name = {"zip-abs-link": "src.zip", "zip-bomb": "src.zip"}.get(kind, "src.tar.gz")
    fixture = f"{kind}.zip" if kind.startswith("zip") else f"{kind}.tar.gz"

    def setup(work: Path, fixtures: Path) -> None:
        (work / name).write_bytes((fixtures / "sources" / fixture).read_bytes())

    argv = ["build", *MAGMA, "--source", name, "--work-dir", "w"]
    if rng.random() < 0.2:
        argv.append("--json")
    return Case(argv, setup, inputs=(name,), label=f"source:{kind}")


GENERATORS: tuple[tuple[Callable[[random.Random], Case], int], ...] = (
    (emit_case, 14),
    (secret_case, 12),
    (url_case, 8),
    (journal_case, 5),
    (tool_case, 3),
    (source_case, 3),
)


# -- checks ------------------------------------------------------------------------------------

_RECORDER = '#!/bin/sh\nprintf \'%s\\n\' "$@" >> "$ARGV_LOG"\n'


def stand_ins(root: Path) -> Path:
    """`condapipe` and `python` that only record their argv: what a runner would be handed."""
    bindir = root / "stand-ins"
    if not bindir.is_dir():
        bindir.mkdir(parents=True)
        for name in ("condapipe", "python"):
            (bindir / name).write_text(_RECORDER)
            (bindir / name).chmod(0o755)
    return bindir


def run_workflow_lines(text: str, where: Path, bindir: Path) -> str:
    """Run every `run:` line of the workflow under bash in `where`; '' or why it could not."""
    try:
        doc = YAML(typ="safe").load(text)
    except Exception as exc:
        return f"the workflow is not YAML: {exc}"
    where.mkdir(exist_ok=True)
    for job in (doc or {}).get("jobs", {}).values():
        for step in job.get("steps", []):
            if "run" not in step:
                continue
            env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(where), "ARGV_LOG": str(where / "argv.log")}
            for k, v in (step.get("env") or {}).items():
                env[str(k)] = re.sub(r"\$\{\{[^}]*\}\}", "from-ci", str(v))
            try:
                subprocess.run(
                    ["bash", "--noprofile", "--norc", "-c", step["run"]],
                    cwd=where,
                    env=env,
                    capture_output=True,
                    timeout=20,
                )
            except subprocess.TimeoutExpired:
                return f"a run line hung: {step['run'][:80]!r}"
    return ""


def pwned(box: Path) -> list[str]:
    found = [str(p.relative_to(box)) for p in box.rglob("PWNED*")]
    found += [p for p in ("/tmp/PWNED-abs",) if os.path.lexists(p)]
    return found


def canary_files(work: Path, sources: tuple[str, ...]) -> list[str]:
    """Files under work/ (other than the user's own `sources`) that hold CANARY."""
    found = []
    needle = CANARY.encode()
    for dirpath, _dirs, files in os.walk(work):
        for name in files:
            path = Path(dirpath) / name
            rel = str(path.relative_to(work))
            if rel in sources or path.is_symlink() or not path.is_file():
                continue
            with path.open("rb") as fh:
                if needle in fh.read(64 << 20):
                    found.append(rel)
    return found

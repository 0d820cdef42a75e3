"""Fuzz cases of issue 38 (hostile input, round 4): wheels, --source pre-scans, secrets in URL parts,
files named by environment variables, and signals to every command.

Hostile wheels carry a METADATA Name or Version that climbs out of the channel, bytes that are not
UTF-8, `..` members and zip bombs; pre-scan archives a member claiming a TiB; URLs put CANARY in
their user part, query or fragment; $CONDAPIPE_MEMINFO and friends name devices, FIFOs and huge
files. A signal case is sent SIGINT, SIGTERM or SIGHUP (to the process or its group) once the
command has its handlers installed: it must end in one line, exit 130 or its own status, with no
"Exception ignored" and no traceback.
"""

from __future__ import annotations

import bz2
import io
import os
import random
import signal
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from fuzz.case import CANARY, Case

MAGMA = ["magma", "--cuda", "12.4"]
_WHEEL_INFO = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _wheel(path: Path, name: str, version: str, meta: bytes, members: dict[str, bytes]) -> None:
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(member, data)
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", _WHEEL_INFO)


def _meta(name: bytes, version: bytes) -> bytes:
    return b"Metadata-Version: 2.1\nName: " + name + b"\nVersion: " + version + b"\n"


WHEEL_KINDS = (
    "good",
    "version-climb",
    "version-abs",
    "name-climb",
    "name-not-utf8",
    "version-long",
    "member-dotdot",
    "member-abs",
    "bomb",
    "many",
    "not-a-zip",
    "no-metadata",
    "huge-metadata",
    "data-scheme",
)


def build_wheels(fixtures: Path) -> None:
    """One wheel of each WHEEL_KINDS under fixtures/wheels/<kind>/ (built once per campaign)."""
    out = fixtures / "wheels"
    if out.is_dir():
        return
    ok = {"demo/__init__.py": b"X = 1\n"}
    specs: dict[str, tuple[bytes, dict[str, bytes]]] = {
        "good": (_meta(b"demo", b"1.0"), ok),
        "version-climb": (_meta(b"demo", b"1.0/../../../../outside/evil"), ok),
        "version-abs": (_meta(b"demo", b"/tmp/PWNED-abs"), ok),
        "name-climb": (_meta(b"../../outside/x", b"1.0"), ok),
        "name-not-utf8": (_meta(b"de\xffmo", b"1.0"), ok),
        "version-long": (_meta(b"demo", b"1" * 100_000), ok),
        "member-dotdot": (_meta(b"demo", b"1.0"), {"../../outside/precious.txt": b"x"}),
        "member-abs": (_meta(b"demo", b"1.0"), {"/tmp/PWNED-abs": b"x"}),
        "bomb": (_meta(b"demo", b"1.0"), {"demo/zeros.bin": bytes(48 << 20)}),
        "many": (_meta(b"demo", b"1.0"), {f"demo/f{i}.py": b"" for i in range(2500)}),
        "huge-metadata": (_meta(b"demo", b"1.0") + b"X: " + b"y" * (2 << 20) + b"\n", ok),
        "data-scheme": (_meta(b"demo", b"1.0"), {"demo-1.0.data/../../x": b"x", **ok}),
    }
    for kind in WHEEL_KINDS:
        folder = out / kind
        folder.mkdir(parents=True)
        path = folder / "demo-1.0-py3-none-any.whl"
        if kind == "not-a-zip":
            path.write_bytes(b"PK\x03\x04 not really a zip")
        elif kind == "no-metadata":
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("demo/__init__.py", "X = 1\n")
        else:
            meta, members = specs[kind]
            _wheel(path, "demo", "1.0", meta, members)


def wheel_case(rng: random.Random) -> Case:
    kind = rng.choice(WHEEL_KINDS)

    def setup(work: Path, fixtures: Path) -> None:
        (work / "w").mkdir()
        src = fixtures / "wheels" / kind / "demo-1.0-py3-none-any.whl"
        (work / "w" / src.name).write_bytes(src.read_bytes())
        (work / "ch" / "linux-64").mkdir(parents=True)  # the folders a `..` climb would pass through

    argv = ["wheels", rng.choice(["w", "w/demo-1.0-py3-none-any.whl"]), "--to", "ch"]
    if rng.random() < 0.8:
        argv.append("--no-python")
    if rng.random() < 0.3:
        argv.append("--json")
    return Case(argv, setup, inputs=("w/demo-1.0-py3-none-any.whl",), label=f"wheel:{kind}")


_CHUNK = 40 << 20


def _huge_member_bz2(path: Path, chunks: int) -> None:
    """A .tar.bz2 whose first member claims chunks x 40 MiB of zeros (repeated bzip2 streams)."""
    head = tarfile.TarInfo("magma-2.6.1/zeros.bin")
    head.size = _CHUNK * chunks
    zeros = bz2.compress(bytes(_CHUNK), 9)
    with path.open("wb") as out:
        out.write(bz2.compress(head.tobuf(format=tarfile.GNU_FORMAT)))
        for _ in range(chunks):
            out.write(zeros)


PRESCAN_KINDS = ("tib-member", "gib-member", "zip-bomb", "dotdot", "good", "empty", "garbage")


def build_prescan(fixtures: Path) -> None:
    out = fixtures / "prescan"
    if out.is_dir():
        return
    out.mkdir(parents=True)
    _huge_member_bz2(out / "tib-member.tar.bz2", 26_215)
    _huge_member_bz2(out / "gib-member.tar.bz2", 26)
    with zipfile.ZipFile(out / "zip-bomb.zip", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("magma-2.6.1/zeros", bytes(96 << 20))
    with tarfile.open(out / "dotdot.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("../../outside/precious.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    version = b"#define MAGMA_VERSION_MAJOR 2\n#define MAGMA_VERSION_MINOR 6\n#define MAGMA_VERSION_MICRO 1\n"
    with tarfile.open(out / "good.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("magma-2.6.1/include/magma_types.h")
        info.size = len(version)
        tar.addfile(info, io.BytesIO(version))
    (out / "empty.tar.gz").write_bytes(b"")
    (out / "garbage.tar.bz2").write_bytes(b"BZh9" + os.urandom(64))


def prescan_case(rng: random.Random) -> Case:
    kind = rng.choice(PRESCAN_KINDS)
    fixture = next(p for p in PRESCAN_FILES if p.startswith(kind + "."))
    name = "magma-2.6.1" + fixture[len(kind) :]

    def setup(work: Path, fixtures: Path) -> None:
        (work / name).write_bytes((fixtures / "prescan" / fixture).read_bytes())

    argv = rng.choice(
        [
            ["render", *MAGMA, "--source", name, "-o", "out"],
            ["build", *MAGMA, "--source", name, "--dry-run", "--work-dir", "w"],
            ["plan", *MAGMA, "--source", name],
        ]
    )
    if rng.random() < 0.2:
        argv.append("--json")
    return Case(argv, setup, inputs=(name,), label=f"prescan:{kind}:{argv[0]}")


PRESCAN_FILES = (
    "tib-member.tar.bz2",
    "gib-member.tar.bz2",
    "zip-bomb.zip",
    "dotdot.tar.gz",
    "good.tar.gz",
    "empty.tar.gz",
    "garbage.tar.bz2",
)

URL_SECRETS = [
    f"redis://h:6379/0?password={CANARY}",
    f"redis://h:6379/0#{CANARY}",
    f"s3://bucket/prefix?aws_secret_access_key={CANARY}",
    f"s3://bucket/prefix#{CANARY}",
    f"redis://u:{CANARY}@h:1",
    f"redis://{CANARY}@h:1",
    f"REDIS://h:1/0?token={CANARY}",
]
ENV_URLS = [
    f"https://h/simple?token={CANARY}",
    f"redis://h:1/0#password={CANARY}",
    f"https://h/x?X-Amz-Signature={CANARY}",
    f"https://u:{CANARY}@h/x",
]
SITE_SECRETS = [
    f"http://host/?token={CANARY}",
    f"https://host/#{CANARY}",
    f"HTTP://host/api?key={CANARY}",
    f"host.example/?token={CANARY}",
    f"https://u:{CANARY}@host",
]


def url_part_case(rng: random.Random) -> Case:
    """CANARY in a URL's user part, query or fragment, by flag, config file or environment."""
    way = rng.choice(
        [
            "flag-cache",
            "env-cache",
            "config-cache",
            "channel",
            "site",
            "config-site",
            "env-flag",
            "config-env",
        ]
    )
    config = 'package = "magma"\ncuda = "12.4"\n'
    env: tuple[tuple[str, str], ...] = ()
    extra: list[str] = []
    command = rng.choice(
        [
            ["build", *MAGMA, "--dry-run"],
            ["plan", *MAGMA, "--emit", "github-actions"],
            ["plan", *MAGMA, "--emit", "json", "-o", "wf.json"],
            ["render", *MAGMA, "-o", "out"],
            ["config", "show"],
            ["doctor", *MAGMA],
        ]
    )
    if way == "flag-cache":
        extra = ["--compile-cache", rng.choice(URL_SECRETS)]
        if command[0] in ("render", "config", "doctor"):
            command = ["build", *MAGMA, "--dry-run"]
    elif way == "env-cache":
        env = (("CONDAPIPE_COMPILE_CACHE", rng.choice(URL_SECRETS)),)
    elif way == "config-cache":
        config += f'compile_cache = "{rng.choice(URL_SECRETS)}"\n'
    elif way == "channel":
        extra = ["-c", rng.choice([f"https://h/chan?token={CANARY}", f"https://h/chan#{CANARY}"])]
        if command[0] not in ("build", "plan"):
            command = ["build", *MAGMA, "--dry-run"]
    elif way == "env-flag":
        extra = ["--env", f"INDEX_URL={rng.choice(ENV_URLS)}"]
        if command[0] == "config":
            command = ["render", *MAGMA, "-o", "out"]
    elif way == "config-env":
        config += f'[env]\nINDEX_URL = "{rng.choice(ENV_URLS)}"\n'
    elif way == "site":
        command = ["upload", "--channel", "o", "--site-url", rng.choice(SITE_SECRETS), "x.conda"]
        command += rng.choice([["--dry-run"], ["--retries", "1"]])
    else:
        config += f'[upload]\nsite_url = "{rng.choice(SITE_SECRETS)}"\n'
        command = ["upload", "--channel", "o", "--dry-run", "x.conda"]
    argv = [*command, *extra]
    if rng.random() < 0.3:
        argv.append("--json")

    def setup(work: Path, fixtures: Path) -> None:
        (work / "condapipe.toml").write_text(config)
        (work / "x.conda").write_bytes(b"")

    return Case(
        argv,
        setup,
        canary=True,
        canary_sources=("condapipe.toml",),
        protected=("condapipe.toml",),
        env=env,
        label=f"urlpart:{way}:{command[0]}",
    )


FILE_VALUES = ["/dev/zero", "/dev/urandom", "fifo", "folder", "missing", "huge", "/dev/null", ""]


def env_file_case(rng: random.Random) -> Case:
    """Files and numbers named by environment variables: devices, FIFOs, folders, huge files, inf."""
    variable = rng.choice(
        [
            "CONDAPIPE_MEMINFO",
            "CONDAPIPE_DRIVER_VERSION_FILE",
            "CONDAPIPE_CHANNEL_TIMEOUT",
            "CONDAPIPE_UPLOAD_TIMEOUT",
            "CONDAPIPE_MAX_UNPACK_RATIO",
            "CONDAPIPE_CUDA_ROOTS",
        ]
    )
    if variable in ("CONDAPIPE_MEMINFO", "CONDAPIPE_DRIVER_VERSION_FILE", "CONDAPIPE_CUDA_ROOTS"):
        value = rng.choice(FILE_VALUES)
    else:
        value = rng.choice(["inf", "-inf", "nan", "1e400", "0", "-1", "x", "9" * 5000, "1e-300", " "])
    argv = rng.choice(
        [
            ["doctor", *MAGMA],
            ["doctor"],
            ["build", *MAGMA, "--dry-run"],
            ["upload", "--channel", "o", "--site-url", "http://127.0.0.1:9", "--retries", "1", "x.conda"],
            ["render", *MAGMA, "-o", "out"],
        ]
    )
    if rng.random() < 0.3:
        argv.append("--json")

    def setup(work: Path, fixtures: Path) -> None:
        os.mkfifo(work / "fifo")
        (work / "folder").mkdir()
        with (work / "huge").open("wb") as fh:
            fh.write(b"MemTotal:       67108864 kB\nMemAvailable:   33554432 kB\n")
            fh.truncate(4 << 30)  # sparse
        (work / "x.conda").write_bytes(b"")

    # a relative value (fifo, folder, huge) names a file in work/, the command's current folder
    return Case(argv, setup, env=((variable, value),), label=f"envfile:{variable}:{value[:12]}")


SIGNAL_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("render", *MAGMA, "-o", "out"),
    ("render", *MAGMA, "--source", "magma-2.6.1.tar.bz2", "-o", "out"),
    ("build", *MAGMA, "--dry-run", "--work-dir", "w"),
    ("build", *MAGMA, "--source", "magma-2.6.1.tar.bz2", "--dry-run", "--work-dir", "w"),
    ("doctor", *MAGMA),
    ("doctor",),
    ("plan", *MAGMA, "--emit", "github-actions"),
    ("config", "show"),
    ("patches", "list"),
    ("patches", "check", "--tree", "."),
    ("fix", "demo-1.0-0.conda"),
    ("verify", "demo-1.0-0.conda"),
    ("index", "chan"),
    ("wheels", "w", "--to", "ch"),
    ("upload", "--to", "dest", "demo-1.0-0.conda"),
    ("upload", "--channel", "o", "--site-url", "http://127.0.0.1:9", "--retries", "3", "demo-1.0-0.conda"),
)


def signal_case(rng: random.Random) -> Case:
    """SIGINT, SIGTERM or SIGHUP to a running command, or to its process group."""
    argv = list(rng.choice(SIGNAL_COMMANDS))
    signum = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
    group = rng.random() < 0.5
    delay = rng.choice([0.0, 0.05, 0.2, 0.5, 1.0])
    slow_tool = rng.random() < 0.5

    def setup(work: Path, fixtures: Path) -> None:
        (work / "demo-1.0-0.conda").write_bytes((fixtures / "clean.conda" / "demo-1.0-0.conda").read_bytes())
        (work / "chan" / "linux-64").mkdir(parents=True)
        package = (work / "demo-1.0-0.conda").read_bytes()
        (work / "chan" / "linux-64" / "demo-1.0-0.conda").write_bytes(package)
        (work / "w").mkdir()
        good = fixtures / "wheels" / "good" / "demo-1.0-py3-none-any.whl"
        (work / "w" / good.name).write_bytes(good.read_bytes())
        (work / "magma-2.6.1.tar.bz2").write_bytes((fixtures / "prescan" / "gib-member.tar.bz2").read_bytes())
        if slow_tool:  # doctor asks nvcc: one that takes its time
            (work / "home" / "bin").mkdir(parents=True, exist_ok=True)
            nvcc = work / "home" / "bin" / "nvcc"
            nvcc.write_text("#!/bin/sh\nsleep 3\n")
            nvcc.chmod(0o755)

    env = (("CONDAPIPE_MAX_UNPACK_RATIO", "1000000"), ("CONDAPIPE_MAX_UNPACK_BYTES", str(64 << 30)))
    if slow_tool:  # a relative PATH entry: work/ is the command's current folder
        env += (("PATH", "home/bin:" + os.environ.get("PATH", "/usr/bin:/bin")),)
    return Case(
        argv,
        setup,
        inputs=("demo-1.0-0.conda",),
        env=env,
        signal=(int(signum), delay, group),
        label=f"signal:{argv[0]}:{signum.name}:{'group' if group else 'process'}",
    )


GENERATORS: tuple[tuple[Callable[[random.Random], Case], int], ...] = (
    (wheel_case, 10),
    (prescan_case, 6),
    (url_part_case, 8),
    (env_file_case, 8),
    (signal_case, 12),
)


def build_fixtures(fixtures: Path) -> None:
    build_wheels(fixtures)
    build_prescan(fixtures)

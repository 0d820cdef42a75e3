"""The CLI fuzz campaign: generated invocations of every subcommand, each checked for the failures
a user must never see.

Each invocation runs in a forked child of a process that has imported condapipe once (fast,
and the same code path as the console script: `main.main(argv)`), inside its own sandbox:

    ROOT/case-N/work      the current directory (inputs copied here), HOME is ROOT/case-N/home,
    ROOT/case-N/tmp       TMPDIR,
    ROOT/case-N/outside   a sentinel tree next to the sandbox, and ROOT/escape (shared) that
                          hostile archives aim at with absolute names.

Failure classes: `traceback` (a Python traceback or "internal error" in the output), `hang`
(past the time limit), `signal` (killed by a signal), `exit-code` (not 0/1/2/3), `outside-write`
(a sentinel or the sandbox's surroundings changed), `input-changed` (an input package changed by
a failed command), `leftover` (a .tmp/.old-/scratch file left in the sandbox, or TMPDIR not empty),
`json` (--json asked, the command failed, and stdout is not JSON).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import stat
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from channel_helpers import closed_port_url

from fuzz import archives, round3, round4
from fuzz.case import CANARY, Case

CLASSES = (
    "traceback",
    "hang",
    "signal",
    "exit-code",
    "outside-write",
    "input-changed",
    "leftover",
    "json",
    "secret",
    "injection",
    "interrupt",
)
LEFTOVER_MARKS = (".tmp", ".old-", ".condapipe-fix-", ".condapipe-verify-", ".part")


# Remote channels fail at once, as on a machine without network, whatever network this one has
# (a network that swallows packets would make every resolving case wait out its timeout).
def _no_network() -> dict[str, str]:
    """One proxy where nothing listens, for every scheme; 127.0.0.1 (the fakes) stays direct."""
    proxy = closed_port_url()
    names = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
    return {**dict.fromkeys(names, proxy), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}


LIMIT_ENV = {"CONDAPIPE_MAX_UNPACK_BYTES": str(32 << 20), "CONDAPIPE_MAX_UNPACK_FILES": "2000"}


@dataclass
class Result:
    case: Case
    code: int | None
    classes: list[str] = field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0
    signalled: bool = False


# -- the cases ---------------------------------------------------------------------------------

ODD = [
    "",
    " ",
    "nan",
    "inf",
    "-1",
    "0",
    "99999999999999999999999",
    "1e309",
    "../..",
    "/",
    "cu124",
    "cuda12.4",
    "12.4.1",
    "py3.10",
    "3.10.1",
    "3",
    "12",
    "cpu",
    "CPU",
    "\u2603",
    "a" * 3000,
    "-x",
    "8.0;;9.0",
    "sm_",
    "native",
    "12.4",
    "3.10",
    "2.4.1",
    "linux-64",
    "linux-aarch64",
    "mkl",
    "x=y",
    "=",
    "8.0+PTX",
    "Hopper",
    "orin",
    "2.6.1",
    "12.8",
    "3.12",
    "13.0",
    "1.13.1",
    "%s",
    "{{x}}",
]
PACKAGES = ["pytorch", "magma", "libtorch", "cuda-smoke", "nosuch", "", "../x"]
SPEC_FLAGS = [
    "--version",
    "--build-number",
    "--python",
    "--cuda",
    "--cudnn",
    "--arch",
    "--platform",
    "--blas",
    "--source",
    "--jetson",
    "--env",
    "--config",
]
GOOD = {"pytorch": ["--version", "2.4.1", "--cuda", "12.4", "--python", "3.10"], "magma": ["--cuda", "12.4"]}

TOML_BODIES = [
    "tool = 5\n",
    'tool = "x"\n',
    'tool = "condapipe"\n',
    "tool = [1, 2]\n",
    "[tool]\ncondapipe = 5\n",
    "[tool.condapipe]\ncuda = 5\n",
    "[tool.condapipe]\npython = [1, 2]\n",
    "[tool.condapipe]\npackage = 7\n",
    "a = " + "[" * 3000 + "]" * 3000 + "\n",
    "a = " + "{b = " * 400 + "1" + "}" * 400 + "\n",
    "\x00\xff\xfe binary",
    "[tool.condapipe]\n[tool.condapipe.upload]\nsite_url = 5\n",
    '[tool.condapipe.upload]\nsite_url = "ftp://x"\n',
    '[tool.condapipe]\ncuda = "cu124"\n',
    "[tool.condapipe]\nbuild_number = 99999999999999999999\n",
    "[tool.condapipe]\nenv = {A = [1]}\n",
    "[tool.condapipe]\n[tool.condapipe.packages]\nmagma = 5\n",
    '[tool.condapipe]\nsource = "/nonexistent"\n',
    '[tool.condapipe]\njetson = "x"\n',
    '[tool.condapipe]\npackage = "magma"\ncuda = "12.4"\n',
    "",
    "=" * 100,
    '[tool.condapipe]\nplatform = ""\n',
    "[tool.condapipe]\narch = []\n",
]
CATALOGS = [
    b"\xff\xfe\x00\x01binary",
    b"entries: 5\n",
    b"- a\n- b\n",
    b"[" * 5000,
    b"entries:\n  - 5\n",
    b"entries:\n  - {id: x, package: pytorch, file: ../../../etc/passwd}\n",
    b"",
    b"a: b: c",
]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _writer(name: str, data: bytes | str) -> Callable[[Path, Path], None]:
    def setup(work: Path, fixtures: Path) -> None:
        (work / name).write_bytes(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)

    return setup


def _package_setup(kind: str, fmt: str, where: str) -> tuple[Callable[[Path, Path], None], str]:
    name = archives.build_name(kind, fmt)
    rel = f"{where}/{name}" if where else name

    def setup(work: Path, fixtures: Path) -> None:
        dest = work / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fixtures / f"{kind}{fmt}" / name, dest)

    return setup, rel


def package_case(rng: random.Random) -> Case:
    kind = rng.choice(archives.ALL_KINDS)
    fmt = rng.choice(archives.FORMATS)
    command = rng.choice(
        [
            "verify",
            "verify-deep",
            "fix",
            "fix-dry",
            "fix-out",
            "upload-to",
            "upload-dry",
            "index",
            "upload-outdir",
            "upload-noverify",
        ]
    )
    in_channel = command in ("index", "upload-outdir")
    setup, rel = _package_setup(kind, fmt, "chan/linux-64" if in_channel else "")
    argv = {
        "verify": ["verify", rel],
        "verify-deep": ["verify", "--deep", rel],
        "fix": ["fix", rel],
        "fix-dry": ["fix", "--dry-run", rel],
        "fix-out": ["fix", rel, "-o", "out"],
        "upload-to": ["upload", "--to", "dest", rel],
        "upload-dry": ["upload", "--to", "dest", "--dry-run", rel],
        "upload-noverify": ["upload", "--to", "dest", "--no-verify", rel],
        "index": ["index", "chan"],
        "upload-outdir": ["upload", "--to", "dest", "--output-dir", "chan"],
    }[command]
    if rng.random() < 0.3:
        argv.append("--json")
    return Case(argv, setup, (rel,), f"package:{kind}{fmt}:{command}")


def flags_case(rng: random.Random) -> Case:
    command = rng.choice(["render", "build", "doctor", "config", "plan"])
    package = rng.choice(PACKAGES[:4]) if rng.random() < 0.85 else rng.choice(PACKAGES)
    argv = [command] if command != "config" else ["config", "show"]
    if command in ("render", "build", "doctor", "plan") and package:
        argv.append(package)
    if rng.random() < 0.6:
        argv += GOOD.get(package, [])
    for _ in range(rng.randint(1, 3)):
        flag = rng.choice(SPEC_FLAGS)
        argv += [flag, rng.choice(ODD)]
    if command == "render":
        target = rng.choice(["out", "out", ".", "..", "", "../outside", "home"])
        argv += ["-o", target]
        # --force replaces the folder the user names: onto ../outside (the sentinel beside the
        # sandbox) that is the user's own request, not an escape; without it, a refusal
        if rng.random() < 0.4 and target != "../outside":
            argv.append("--force")
    if command == "build":
        argv.append("--dry-run")
        if rng.random() < 0.3:
            argv += ["--output-dir", rng.choice(["", "ch", "/", "."])]
    if command == "plan" and rng.random() < 0.5:
        argv += ["--emit", rng.choice(["json", "github-actions", "x"])]
    if rng.random() < 0.3:
        argv.append("--json")
    return Case(argv, label=f"flags:{command}")


def config_case(rng: random.Random) -> Case:
    name = rng.choice(["pyproject.toml", "condapipe.toml", "custom.toml"])
    body = rng.choice(TOML_BODIES)
    command = rng.choice(
        [
            ["config", "show"],
            ["render", "magma", "--cuda", "12.4", "-o", "out"],
            ["doctor", "magma", "--cuda", "12.4"],
            ["build", "magma", "--cuda", "12.4", "--dry-run"],
            ["upload", "--channel", "o", "--dry-run", "x.conda"],
        ]
    )
    argv = list(command)
    if name == "custom.toml":
        argv += ["--config", "custom.toml"]
    if rng.random() < 0.3:
        argv.append("--json")
    return Case(argv, _writer(name, body), label=f"config:{name}")


def path_case(rng: random.Random) -> Case:
    """User-named paths that are not regular files, and destinations that must be refused."""
    special = rng.choice(["fifo", "dir", "/dev/null", "missing", "loop"])

    def setup(work: Path, fixtures: Path) -> None:
        target = work / "p"
        if special == "fifo":
            _fifo(target)
        elif special == "dir":
            target.mkdir()
        elif special == "loop":
            target.symlink_to("p")

    path = "/dev/null" if special == "/dev/null" else ("p" if special != "missing" else "nope")
    argv = rng.choice(
        [
            ["config", "show", "--config", path],
            ["render", "magma", "--cuda", "12.4", "-o", "out", "--config", path],
            ["patches", "list", "--catalog", path],
            ["upload", "--channel", "o", "--token-file", path, "--site-url", "http://127.0.0.1:9", "x.conda"],
            ["verify", path + ".conda"],
            ["fix", path],
            ["index", path],
        ]
    )
    if argv[0] in ("verify",) and special == "fifo":
        setup_fifo_pkg = setup

        def setup(work: Path, fixtures: Path) -> None:
            setup_fifo_pkg(work, fixtures)
            os.rename(work / "p", work / "p.conda")

    return Case(argv, setup, label=f"path:{special}:{argv[0]}")


def destination_case(rng: random.Random) -> Case:
    def setup(work: Path, fixtures: Path) -> None:
        (work / "keep.txt").write_text("mine\n")
        (work / "bin").mkdir()
        (work / "bin" / "tool").write_bytes(b"\x7fELF not really")
        (work / "ro").mkdir()
        (work / "ro" / "f").write_text("x")
        (work / "ro").chmod(0o555)

    argv = rng.choice(
        [
            [
                "render",
                "magma",
                "--cuda",
                "12.4",
                "--force",
                "-o",
                rng.choice([".", "..", "", "home", "ro", "./", "bin/.."]),
            ],
            ["index", rng.choice(["", ".", "..", "bin"])],  # `..` is outside the sandbox: only as a refusal
            ["index", rng.choice(["", ".", "bin"]), "--init"],
            ["index", "/", "--dry-run"],
            ["fix", rng.choice(["", ".", "bin", ".."])] + (["--dry-run"] if rng.random() < 0.5 else []),
            [
                "upload",
                "--to",
                rng.choice(["", "file:///", "/", "file://host/x", "ftp://x", "file://"]),
                "--dry-run",
            ],
            ["upload", "--to", "dest", "--output-dir", rng.choice(["", "/", "nope"])],
            ["build", "magma", "--cuda", "12.4", "--dry-run", "--output-dir", rng.choice(["", "/"])],
            ["fix", "x.conda", "--zstd-level", rng.choice(["0", "23", "-1", "nan"])],
            ["upload", "--to", "dest", "--retry-delay", rng.choice(["nan", "-1", "inf", "1e400"])],
            ["upload", "--channel", "o", "--site-url", rng.choice(["ftp://x", "", "file:///etc", "http://"])],
        ]
    )
    return Case(argv, setup, ("keep.txt", "bin/tool", "ro/f"), label=f"dest:{argv[0]}")


def patches_case(rng: random.Random) -> Case:
    body = rng.choice(CATALOGS)
    argv = rng.choice(
        [
            ["patches", "list", "--catalog", "cat.yaml"],
            ["patches", "list", "--for", rng.choice(["pytorch==1.13.0", "x==", "==1", "pytorch==abc"])],
            ["patches", "list", "--cuda", rng.choice(ODD)],
            ["patches", "check", "--catalog", "cat.yaml", "--tree", "."],
        ]
    )
    if rng.random() < 0.3:
        argv.append("--json")
    return Case(argv, _writer("cat.yaml", body), label="patches")


GENERATORS: tuple[tuple[Callable[[random.Random], Case], int], ...] = (
    (package_case, 45),
    (flags_case, 20),
    (config_case, 12),
    (path_case, 8),
    (destination_case, 10),
    (patches_case, 5),
    *round3.GENERATORS,  # issue 25: workflows, secrets, output paths, journals, tool channel, sources
    *round4.GENERATORS,  # issue 38: wheels, pre-scans, URL parts, environment files, signals
)


def generate(seed: int, count: int) -> list[Case]:
    """`count` cases, the same for the same seed."""
    rng = random.Random(seed)
    weights = [w for _, w in GENERATORS]
    cases = []
    for _ in range(count):
        gen = rng.choices([g for g, _ in GENERATORS], weights)[0]
        cases.append(gen(random.Random(rng.getrandbits(64))))
    return cases


# -- running -----------------------------------------------------------------------------------


def build_fixtures(fixtures: Path, escape: Path) -> None:
    for kind in archives.ALL_KINDS:
        for fmt in archives.FORMATS:
            out = fixtures / f"{kind}{fmt}"
            if not out.exists():
                archives.build(kind, fmt, out, escape)
    round3.build_sources(fixtures)
    round4.build_fixtures(fixtures)


def _tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    if not path.exists():
        return "absent"
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = Path(dirpath) / name
            st = full.lstat()
            h.update(f"{full.relative_to(path)}:{st.st_mode}:{st.st_size}\n".encode())
            if stat.S_ISREG(st.st_mode):
                h.update(full.read_bytes())
    return h.hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def _prepare(root: Path, n: int, case: Case, fixtures: Path) -> Path:
    box = root / f"case-{n:05d}"
    for sub in ("work", "home", "tmp", "outside"):
        (box / sub).mkdir(parents=True)
    (box / "outside" / "precious.txt").write_text("do not touch\n")
    (box / "work" / "home").mkdir()
    case.setup(box / "work", fixtures)
    return box


def _child(box: Path, case: Case, no_network: dict[str, str]) -> None:
    """In the forked child: sandbox, run the CLI like the console script, leave with its status.

    The child leads a process group of its own (a signal case may signal the group) and starts
    with a terminal job's signal dispositions."""
    from condapipe.cli.main import main

    code = 70
    argv = case.argv
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.chdir(box / "work")
        os.environ.update({"HOME": str(box / "work" / "home"), "TMPDIR": str(box / "tmp"), **LIMIT_ENV})
        os.environ.update(no_network)
        os.environ.update(dict(case.env))
        for var in ("BINSTAR_API_TOKEN", "ANACONDA_API_TOKEN"):
            os.environ.pop(var, None)
        import tempfile

        tempfile.tempdir = None
        out = os.open(box / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(box / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        # under pytest sys.stdout/stderr are capture objects, not fds 1/2: write to the files
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        try:
            main.main(args=argv, prog_name="condapipe")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 71
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _check(
    root: Path,
    box: Path,
    case: Case,
    code: int | None,
    status: int,
    before: dict,
    escape_digest: str,
    escape: Path,
    timed_out: bool,
) -> Result:
    res = Result(case, code)
    out = (box / "stdout").read_text(errors="replace") if (box / "stdout").exists() else ""
    err = (box / "stderr").read_text(errors="replace") if (box / "stderr").exists() else ""
    if timed_out:
        res.classes.append("hang")
    elif os.WIFSIGNALED(status):
        res.classes.append("signal")
        res.detail = f"signal {os.WTERMSIG(status)}"
    if (
        "Traceback (most recent call last)" in out + err
        or "internal error" in out + err
        or "Exception ignored" in err
        or code == 71
    ):
        res.classes.append("traceback")
        res.detail = (err.strip().splitlines() or [""])[-1][:300]
    if code is not None and code not in (0, 1, 2, 3) and not (case.signal and code == 130):
        res.classes.append("exit-code")
    if case.signal and code == 130 and err.strip().splitlines()[-1:] != ["interrupted"]:
        res.classes.append("interrupt")  # one line, and no promise to resume what does not resume
        res.detail = f"stderr: {err[-200:]!r}"
    if (
        _tree_digest(box / "outside") != before["outside"]
        or sorted(p.name for p in box.iterdir())
        != sorted(["work", "home", "tmp", "outside", "stdout", "stderr"])
        or _tree_digest(escape) != escape_digest
    ):
        res.classes.append("outside-write")
        res.detail = f"around the sandbox: {sorted(p.name for p in box.iterdir())}"
    if code not in (0, None):
        for rel, digest in before["inputs"].items():
            if _file_digest(box / "work" / rel) != digest:
                res.classes.append("input-changed")
                res.detail = rel
                break
    left = [
        str(p.relative_to(box))
        for p in (box / "work").rglob("*")
        if any(mark in p.name for mark in LEFTOVER_MARKS) and p.name != ".condapipe-channel.lock"
    ]
    left += [str(p.relative_to(box)) for p in (box / "tmp").iterdir()]
    if left and not timed_out:
        res.classes.append("leftover")
        res.detail = ", ".join(left[:3])
    _check_round3(root, box, case, code, before, res, out, err)
    if "--json" in case.argv and code in (1, 2, 3) and not timed_out:
        try:
            json.loads(out)
        except ValueError:
            res.classes.append("json")
            res.detail = f"stdout: {out[:120]!r}"
    return res


def _check_round3(
    root: Path, box: Path, case: Case, code: int | None, before: dict, res: Result, out: str, err: str
) -> None:
    """Issue 25's classes: nothing executed (`injection`), no secret printed or written (`secret`),
    protected files unchanged and forbidden paths absent (`input-changed`)."""
    work = box / "work"
    if case.workflow is not None and code == 0:
        text = out if case.workflow == "-" else (work / case.workflow).read_text(errors="replace")
        problem = round3.run_workflow_lines(text, work / ".runner", round3.stand_ins(root))
        if problem:
            res.classes.append("hang" if "hung" in problem else "injection")
            res.detail = problem
    found = round3.pwned(box)
    if found:
        res.classes.append("injection")
        res.detail = f"executed: {found}"
    if case.canary:
        leaks = (["output"] if CANARY in out + err else []) + round3.canary_files(work, case.canary_sources)
        if leaks:
            res.classes.append("secret")
            res.detail = f"the canary secret is in {leaks}"
    for rel in case.protected:
        if _file_digest(work / rel) != before["protected"].get(rel):
            res.classes.append("input-changed")
            res.detail = f"{rel} changed"
    for rel in case.absent:
        if os.path.lexists(work / rel):
            res.classes.append("input-changed")
            res.detail = f"{rel} was made"


def run(
    cases: list[Case],
    root: Path,
    *,
    workers: int = 0,
    timeout: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Result]:
    """Run every case in its sandbox under ROOT, `workers` at a time; returns the checked results.

    Call it in a fresh interpreter (scripts/fuzz_cli.py): a forked child inherits none of its
    parent's threads, so once py-rattler's runtime runs in the parent (any earlier resolve in a
    pytest process), every child that resolves waits forever on threads it does not have.
    """
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads > 1:
        raise RuntimeError(
            f"the fuzz campaign forks: run it in a single-threaded process, not one of {threads}"
        )
    import condapipe.cli.main  # noqa: F401 - imported once, before forking

    for module in (
        "render",
        "build",
        "index",
        "upload",
        "patches",
        "config",
        "fix",
        "verify",
        "doctor",
        "plan",
        "wheels",
    ):
        __import__(f"condapipe.cli.commands.{module}")
    root.mkdir(parents=True, exist_ok=True)
    fixtures, escape = root / "fixtures", root / "escape"
    escape.mkdir(exist_ok=True)
    (escape / "secret").write_text("host secret\n")
    build_fixtures(fixtures, escape)
    escape_digest = _tree_digest(escape)
    workers = workers or os.cpu_count() or 1
    no_network = _no_network()
    results: list[Result] = []
    running: dict[int, tuple[int, Path, Case, dict, float]] = {}
    armed: dict[int, float] = {}  # pid -> when its signal handlers were first seen installed
    signalled: dict[int, bool] = {}
    pending = list(enumerate(cases))
    while pending or running:
        while pending and len(running) < workers:
            n, case = pending.pop(0)
            box = _prepare(root, n, case, fixtures)
            before = {
                "outside": _tree_digest(box / "outside"),
                "inputs": {rel: _file_digest(box / "work" / rel) for rel in case.inputs},
                "protected": {rel: _file_digest(box / "work" / rel) for rel in case.protected},
            }
            pid = os.fork()
            if pid == 0:
                _child(box, case, no_network)
            running[pid] = (n, box, case, before, time.monotonic())
        time.sleep(0.005)
        for pid, (_n, box, case, before, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            timed_out = False
            if not done:
                if case.signal and pid not in signalled:
                    _maybe_signal(pid, case.signal, armed, signalled)
                if time.monotonic() - started < timeout:
                    continue
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                timed_out = True
            del running[pid]
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            res = _check(root, box, case, code, status, before, escape_digest, escape, timed_out)
            res.seconds = time.monotonic() - started
            res.signalled = signalled.pop(pid, False)
            armed.pop(pid, None)
            results.append(res)
            if not res.classes:
                _rmtree(box)
            if progress:
                progress(len(results), len(cases))
    return results


def _handles_signals(pid: int) -> bool:
    """True while the process catches SIGTERM: condapipe's handlers are installed (a signal sent
    before, or after the command restored them, would be the default action, not condapipe's)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def _maybe_signal(
    pid: int, spec: tuple[int, float, bool], armed: dict[int, float], signalled: dict[int, bool]
) -> None:
    """Send a signal case's signal once the command has handled signals for `delay` seconds."""
    signum, delay, group = spec
    if not _handles_signals(pid):
        return
    now = time.monotonic()
    if now - armed.setdefault(pid, now) < delay:
        return
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        return
    signalled[pid] = True


def _rmtree(path: Path) -> None:
    def writable(func, failed, _exc):  # type: ignore[no-untyped-def]
        os.chmod(os.path.dirname(failed), 0o700)
        func(failed)

    shutil.rmtree(path, onerror=writable)  # Python 3.11: onerror


def summary(results: list[Result]) -> dict:
    """Invocations, the exit-code histogram, the count in each failure class, examples of failures."""
    codes = Counter("timeout" if r.code is None else str(r.code) for r in results)
    classes = Counter(c for r in results for c in r.classes)
    commands = Counter(r.case.argv[0] if r.case.argv else "" for r in results)
    failures = [
        {"argv": r.case.argv, "label": r.case.label, "classes": r.classes, "detail": r.detail}
        for r in results
        if r.classes
    ]
    return {
        "invocations": len(results),
        "signals_sent": sum(r.signalled for r in results),
        "exit_codes": dict(sorted(codes.items())),
        "failure_classes": {c: classes.get(c, 0) for c in CLASSES},
        "commands": dict(sorted(commands.items())),
        "failures": failures[:50],
    }

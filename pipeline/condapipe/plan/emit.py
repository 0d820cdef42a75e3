"""A plan fanned out on a CI engine: one job per variant, prerequisites first, one publish job last.

`ci_variants` reads the variants and their order from a Plan (its steps name their package, and a
build step needs the publish steps of the prerequisites it consumes); `emit_github_actions` and
`emit_json` turn them into a workflow. Pure functions of the plan and the request, so the same plan
gives the same bytes: no timestamps, no machine paths. Each variant job runs
`condapipe build … --variant ID` into its own channel, which travels to the jobs that need it and to
the publish job as a CI artifact; the publish job merges them, re-indexes, verifies and uploads with
the token from the CI secret (an environment variable condapipe.publish.tokens reads, never the file).

condapipe itself is not published on PyPI, so the runners never `pip install condapipe` by name (anyone
who later registered that name would run code on them): by default a first job builds a wheel from the
repository the workflow runs in, at the workflow's own commit, and every job installs that wheel;
`--install` may name a direct reference instead (`condapipe @ git+https://…@REV`, a wheel URL).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ruamel.yaml import YAML

from condapipe.errors import UsageError
from condapipe.plan.runner import Plan
from condapipe.publish.tokens import TOKEN_ENV_VARS

FORMATS = ("github-actions", "json")
CHANNEL_DIR = "channel"  # each job's output channel, relative to the job's workspace
WORK_DIR = ".condapipe"
PREREQ_DIR = "prerequisites"  # where a job unpacks the channels of the variants it needs
TOKEN_ENV = TOKEN_ENV_VARS[-1]  # ANACONDA_API_TOKEN: anaconda-client's name, read by condapipe upload
TOKEN_SECRET = TOKEN_ENV
UPLOAD_CHANNEL_ENV = "ANACONDA_CHANNEL"  # the anaconda.org owner (given to `plan`, else a CI variable)
INSTALL_ENV = "CONDAPIPE_REQUIREMENT"  # the pip requirement the runners install
FROM_REPOSITORY = "."  # --install default: a wheel built from the workflow's own repository and commit
WHEEL_JOB = "condapipe-wheel"  # the job (and artifact) that builds it
WHEEL_DIR = "condapipe-wheel"
ARTIFACT_PREFIX = "packages-"
# The actions the workflow uses, at majors that run on node24 (actionlint flags node20 ones, whose
# runtime GitHub removes in September 2026). upload-artifact >= 4 and download-artifact >= 4 share
# one artifact backend, so their majors need not match.
ACTIONS = {
    "checkout": "actions/checkout@v5",
    "setup-python": "actions/setup-python@v6",
    "upload-artifact": "actions/upload-artifact@v6",
    "download-artifact": "actions/download-artifact@v7",
}


@dataclass(frozen=True)
class CiVariant:
    """One variant job: its ID (the plan's job label) and the IDs whose packages it consumes."""

    id: str
    needs: tuple[str, ...]


@dataclass(frozen=True)
class CiRequest:
    """What the jobs run besides the plan: the command line that resolves the same spec everywhere."""

    package: str
    spec_flags: tuple[str, ...]  # the resolved spec as flags (defaults the plan chose included)
    build_flags: tuple[str, ...] = ()  # --engine, -c, --no-test, --compile-cache … as given to plan
    runs_on: str = "ubuntu-latest"
    python: str = "3.12"  # the runner's Python for condapipe itself
    install: str = FROM_REPOSITORY  # "." (a wheel of this repository's commit) or a direct reference
    upload_channel: str | None = None  # anaconda.org owner; None: the ANACONDA_CHANNEL variable


def ci_variants(plan: Plan) -> list[CiVariant]:
    """The plan's variants in order, leaving out those it skips (a prerequisite already in a channel)."""
    order: list[str] = []
    skipped: dict[str, bool] = {}
    needs: dict[str, list[str]] = {}
    for step in plan.steps:
        label = step.package
        if label is None:
            continue
        if label not in skipped:
            order.append(label)
            skipped[label] = True
            needs[label] = []
        if step.kind != "test":  # --no-test skips tests in every job; the variant still runs
            skipped[label] = skipped[label] and step.skip_reason is not None
        if step.kind == "build":
            needs[label] += [n.removeprefix("publish:") for n in step.needs if n.startswith("publish:")]
    kept = [label for label in order if not skipped[label]]
    return [CiVariant(label, tuple(n for n in needs[label] if n in kept)) for label in kept]


def _job_key(variant_id: str) -> str:
    """A GitHub job id (letters, digits, `-`, `_`) from a variant ID."""
    key = re.sub(r"[^A-Za-z0-9_-]", "_", variant_id)
    return key if re.match(r"[A-Za-z_]", key) else f"v_{key}"


def _check_text(values: Sequence[str]) -> None:
    """Refuse what GitHub would evaluate or that would break a line of the workflow."""
    for value in values:
        if "${{" in value or "\n" in value or "\r" in value:
            raise UsageError(f"{value!r} cannot go into a CI workflow (no '${{{{' or line breaks)")


# A word of a command: (literal, None) is condapipe's own text (a subcommand, a flag name, a fixed
# folder); (ENV_NAME, value) is a value from the user or the plan, which a workflow passes as the
# step's `env:` entry ENV_NAME and its run line names only as "$ENV_NAME".
Word = tuple[str, str | None]
_LITERAL = re.compile(r"[A-Za-z0-9_./=*-]+")
ARG_ENV_PREFIX = "ARG_"  # env names of a step's values; no tool reads ARG_* from the environment


def _flag_words(flags: Sequence[str]) -> list[Word]:
    """`--flag value …` as words: each `--name` a literal, each value (the next word) a value."""
    words: list[Word] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag in _SWITCHES:
            words.append((flag, None))
            i += 1
            continue
        if not re.fullmatch(r"--[a-z][a-z-]*", flag) or i + 1 >= len(flags):
            raise UsageError(f"cannot write {flag!r} into a CI workflow: expected --FLAG VALUE")
        words += [(flag, None), (_env_name(flag), flags[i + 1])]
        i += 2
    return words


_SWITCHES = frozenset({"--no-test", "--override-channels"})


def _env_name(flag: str) -> str:
    return ARG_ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def build_words(request: CiRequest, variant: CiVariant) -> list[Word]:
    """`condapipe build` for one variant, run in the job's workspace."""
    words: list[Word] = [("condapipe", None), ("build", None), (ARG_ENV_PREFIX + "PACKAGE", request.package)]
    words += _flag_words(request.spec_flags)
    words += [("--variant", None), (ARG_ENV_PREFIX + "VARIANT", variant.id)]
    words += [("--output-dir", None), (CHANNEL_DIR, None), ("--work-dir", None), (WORK_DIR, None)]
    words += _flag_words(request.build_flags)
    for dep in variant.needs:
        words += [("--channel", None), (ARG_ENV_PREFIX + "PREREQUISITE", f"{PREREQ_DIR}/{dep}")]
    return words


def build_argv(request: CiRequest, variant: CiVariant) -> list[str]:
    """The argv of build_words (what a CI engine without a shell runs)."""
    return [value if value is not None else text for text, value in build_words(request, variant)]


def publish_words(request: CiRequest) -> list[list[Word]]:
    """The publish job after merging every artifact into one channel: index, verify, upload."""
    owner = request.upload_channel or f"${UPLOAD_CHANNEL_ENV}"
    return [
        _literals("condapipe", "index", "--force", CHANNEL_DIR),
        # globs, expanded by the shell (nullglob is on in that script)
        _literals("condapipe", "verify", f"{CHANNEL_DIR}/*/*.conda", f"{CHANNEL_DIR}/*/*.tar.bz2"),
        # verified in the step before, from the same files
        [
            *_literals("condapipe", "upload", "--channel"),
            (UPLOAD_CHANNEL_ENV, owner),
            *_literals("--output-dir", CHANNEL_DIR, "--no-verify"),
        ],
    ]


def _literals(*texts: str) -> list[Word]:
    return [(text, None) for text in texts]


def publish_argvs(request: CiRequest) -> list[list[str]]:
    return [
        [value if value is not None else text for text, value in words] for words in publish_words(request)
    ]


def _shell(words: Sequence[Word]) -> tuple[str, dict[str, str]]:
    """One bash line and the `env:` it needs: literals as they are, every value as "$NAME" only.

    A value never appears in the line itself, so no value can be read as shell syntax; names used
    twice (two --cuda) get _2, _3 …"""
    line: list[str] = []
    env: dict[str, str] = {}
    for text, value in words:
        if value is None:
            if not _LITERAL.fullmatch(text):
                raise ValueError(f"not a literal for a run line: {text!r}")  # a bug here, not the user's
            line.append(text)
            continue
        name, n = text, 1
        while name in env:
            n += 1
            name = f"{text}_{n}"
        env[name] = value
        line.append(f'"${name}"')
    return " ".join(line), env


def _check(plan_variants: Sequence[CiVariant], request: CiRequest) -> None:
    if not plan_variants:
        raise UsageError("the plan has nothing to build: every variant is skipped")
    texts = [request.package, *request.spec_flags, *request.build_flags, request.runs_on, request.python]
    _check_text([*texts, request.install, request.upload_channel or ""])
    keys = [_job_key(v.id) for v in plan_variants]
    if len(set(keys)) != len(keys) or "publish" in keys or WHEEL_JOB in keys:
        raise UsageError(f"variant IDs collide as CI job names: {', '.join(keys)}")


def emit_json(plan: Plan, request: CiRequest) -> str:
    """The fan-out for any CI engine: each variant's command, what it needs, what it hands on."""
    variants = ci_variants(plan)
    _check(variants, request)
    doc = {
        "format": "condapipe-ci/1",
        "package": request.package,
        "install": (
            {
                "wheel_from_repository": [
                    "python",
                    "-m",
                    "pip",
                    "wheel",
                    "--no-deps",
                    "--wheel-dir",
                    WHEEL_DIR,
                    ".",
                ],
                "then": f"python -m pip install {WHEEL_DIR}/*.whl in every job",
            }
            if request.install == FROM_REPOSITORY
            else {"requirement": request.install}
        ),
        "variants": [
            {
                "id": v.id,
                "needs": list(v.needs),
                "fetch": {dep: f"{PREREQ_DIR}/{dep}" for dep in v.needs},
                "run": build_argv(request, v),
                "artifact": {"name": ARTIFACT_PREFIX + v.id, "path": CHANNEL_DIR},
            }
            for v in variants
        ],
        "publish": {
            "needs": [v.id for v in variants],
            "fetch_all_into": CHANNEL_DIR,
            "run": publish_argvs(request),
            "secret_env": [TOKEN_ENV],
        },
    }
    return json.dumps(doc, indent=2) + "\n"


def _setup_steps(request: CiRequest) -> list[dict[str, object]]:
    """Python, then condapipe: the wheel the first job built, or the --install direct reference."""
    python: dict[str, object] = {"uses": ACTIONS["setup-python"], "with": {"python-version": request.python}}
    if request.install == FROM_REPOSITORY:
        return [
            python,
            {
                "name": "Fetch the condapipe wheel",
                "uses": ACTIONS["download-artifact"],
                "with": {"name": WHEEL_JOB, "path": WHEEL_DIR},
            },
            {
                "name": "Install condapipe",
                "run": f"shopt -s failglob\npython -m pip install {WHEEL_DIR}/*.whl\n",
            },
        ]
    return [
        python,
        {
            "name": "Install condapipe",
            "env": {INSTALL_ENV: request.install},
            "run": f'python -m pip install "${INSTALL_ENV}"',
        },
    ]


def _wheel_job(request: CiRequest) -> dict[str, object]:
    """The job that builds condapipe's wheel from the repository at the workflow's commit."""
    return {
        "name": "condapipe wheel from this repository",
        "runs-on": request.runs_on,
        "steps": [
            {"uses": ACTIONS["checkout"]},
            {"uses": ACTIONS["setup-python"], "with": {"python-version": request.python}},
            {
                "name": "Build the condapipe wheel",
                "run": f"python -m pip wheel --no-deps --wheel-dir {WHEEL_DIR} .",
            },
            {
                "name": "Hand on the wheel",
                "uses": ACTIONS["upload-artifact"],
                "with": {"name": WHEEL_JOB, "path": WHEEL_DIR, "if-no-files-found": "error"},
            },
        ],
    }


def emit_github_actions(plan: Plan, request: CiRequest) -> str:
    """A GitHub Actions workflow (manual trigger): one job per variant, then `publish`."""
    variants = ci_variants(plan)
    _check(variants, request)
    jobs: dict[str, object] = {}
    wheel = request.install == FROM_REPOSITORY
    if wheel:
        jobs[WHEEL_JOB] = _wheel_job(request)
    for v in variants:
        steps: list[dict[str, object]] = [{"uses": ACTIONS["checkout"]}, *_setup_steps(request)]
        for dep in v.needs:
            steps.append(
                {
                    "name": f"Fetch {dep}",
                    "uses": ACTIONS["download-artifact"],
                    "with": {"name": ARTIFACT_PREFIX + dep, "path": f"{PREREQ_DIR}/{dep}"},
                }
            )
        run, env = _shell(build_words(request, v))
        steps.append({"name": f"Build {v.id}", "env": env, "run": run})
        steps.append(
            {
                "name": "Hand on the packages",
                "uses": ACTIONS["upload-artifact"],
                "with": {"name": ARTIFACT_PREFIX + v.id, "path": CHANNEL_DIR, "if-no-files-found": "error"},
            }
        )
        job: dict[str, object] = {"name": v.id, "runs-on": request.runs_on}
        needs = [WHEEL_JOB] if wheel else []
        needs += [_job_key(dep) for dep in v.needs]
        if needs:
            job["needs"] = needs
        job["steps"] = steps
        jobs[_job_key(v.id)] = job
    (index, _), (verify, _), (upload, upload_env) = (_shell(words) for words in publish_words(request))
    if request.upload_channel is None:
        upload_env[UPLOAD_CHANNEL_ENV] = f"${{{{ vars.{UPLOAD_CHANNEL_ENV} }}}}"
    env = {TOKEN_ENV: f"${{{{ secrets.{TOKEN_SECRET} }}}}", **upload_env}
    jobs["publish"] = {
        "name": "verify and publish",
        "runs-on": request.runs_on,
        "needs": [*([WHEEL_JOB] if wheel else []), *(_job_key(v.id) for v in variants)],
        "steps": [
            *_setup_steps(request),
            {
                "name": "Fetch every variant's packages",
                "uses": ACTIONS["download-artifact"],
                "with": {"pattern": ARTIFACT_PREFIX + "*", "path": CHANNEL_DIR, "merge-multiple": True},
            },
            {"name": "Index the merged channel", "run": index},
            {"name": "Verify every package", "run": f"shopt -s nullglob\n{verify}\n"},
            {"name": "Upload", "env": env, "run": upload},
        ],
    }
    workflow = {
        "name": f"condapipe {request.package}",
        "on": {"workflow_dispatch": None},
        "permissions": {"contents": "read"},
        "jobs": jobs,
    }
    yaml = YAML(typ="rt")
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    out = io.StringIO()
    out.write(
        f"# Written by `condapipe plan {request.package} --emit github-actions`; regenerate, don't edit.\n"
    )
    yaml.dump(_literal_blocks(workflow), out)
    return out.getvalue()


def _literal_blocks(value: object) -> object:
    """Multi-line strings as `|` blocks, so the scripts read as they run."""
    from ruamel.yaml.scalarstring import LiteralScalarString

    if isinstance(value, dict):
        return {k: _literal_blocks(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal_blocks(v) for v in value]
    if isinstance(value, str) and "\n" in value:
        return LiteralScalarString(value)
    return value


def emit(plan: Plan, request: CiRequest, fmt: str) -> str:
    """The workflow text for `fmt` (one of FORMATS)."""
    if fmt == "github-actions":
        return emit_github_actions(plan, request)
    if fmt == "json":
        return emit_json(plan, request)
    raise UsageError(f"--emit {fmt}: choose one of {', '.join(FORMATS)}")

"""RecipeModel: the one internal description of a conda recipe, rendered to both formats.

Families (pytorch, magma, cuda-smoke, ...) build a RecipeModel from a BuildSpec; the writers in
`condapipe.render.recipe_dir` turn it into v0 (meta.yaml + build.sh + conda_build_config.yaml) for conda-build
and v1 (recipe.yaml + build.sh + variants.yaml) for rattler-build. Keeping one model means a recipe
feature exists in both formats or in neither.

Two small conventions keep the model format-neutral:
- Strings may reference variant keys as ``{{ key }}`` (e.g. ``"{{ magma_package }}"``); the v0 writer
  keeps them, the v1 writer turns them into ``${{ key }}``, and build.sh reads them as ``${key}``.
- Conditions are data (`When`), not selector text; each writer spells them in its own syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

VARIANT_REF = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class When:
    """A condition on the target platform, the Python variant and/or the CUDA variant.

    Empty fields mean "any"; set fields must all hold. `cuda` lists `cuda_version` variant values
    ("cpu" for the CPU variant), so one recipe with a mixed matrix can include a line only where it
    belongs.
    """

    platforms: tuple[str, ...] = ()
    python: str = ""  # PEP 440 specifier on the Python variant, e.g. ">=3.9"
    cuda: tuple[str, ...] = ()


ALWAYS = When()


@dataclass(frozen=True)
class Dep:
    """One requirement line: a match spec (may hold ``{{ key }}`` refs) and when it applies."""

    spec: str
    when: When = ALWAYS


@dataclass(frozen=True)
class Requirements:
    """Dependencies per environment, in the order they are written."""

    build: tuple[Dep, ...] = ()
    host: tuple[Dep, ...] = ()
    run: tuple[Dep, ...] = ()
    run_constrained: tuple[Dep, ...] = ()


@dataclass(frozen=True)
class Patch:
    """A patch file copied into the recipe dir and listed in source.patches."""

    name: str  # file name inside the recipe dir
    origin: Path  # file to copy from
    when: When = ALWAYS


@dataclass(frozen=True)
class SourceRef:
    """Exactly one of: git (url + rev, submodules fetched), a local path, or a tarball url + sha256."""

    git_url: str | None = None
    git_rev: str | None = None
    path: Path | None = None
    url: str | None = None
    sha256: str | None = None
    patches: tuple[Patch, ...] = ()

    @property
    def kind(self) -> str:
        if self.git_url:
            return "git"
        if self.path is not None:
            return "path"
        return "url"


@dataclass(frozen=True)
class Script:
    """build.sh: exported env (values may hold ``{{ key }}`` refs) followed by a bash body.

    `passthrough` names variables the user may set when calling the build tool (MAX_JOBS,
    CMAKE_ARGS, ...): both tools start scripts in a clean environment unless told otherwise.
    `secrets` are passed the same way but by name only (the compile cache's endpoint and
    credentials): v1 `secrets` (rattler-build masks them in logs), v0 `script_env`; their values
    never enter the rendered recipe.
    """

    env: tuple[tuple[str, str], ...] = ()
    body: str = ""
    passthrough: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class DownPrioritize:
    """Make the solver prefer other builds where `when` holds (pytorch's CPU build before the mutex).

    v0 writes ``track_features: [feature]``, v1 ``build.variant.down_prioritize_variant`` (which
    rattler-build turns into track_features itself).
    """

    feature: str
    when: When = ALWAYS


@dataclass(frozen=True)
class Tests:
    """What the package must pass after building: imports, shell commands, extra test deps."""

    __test__ = False  # not a pytest test class

    imports: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    # Paths inside the recipe dir (extra files) copied into the test's working directory.
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class About:
    home: str = ""
    license: str = ""
    license_file: str = ""
    summary: str = ""
    dev_url: str = ""


@dataclass(frozen=True)
class Variants:
    """The variant matrix: ordered key -> values, plus groups of keys that vary together."""

    keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    zip_keys: tuple[tuple[str, ...], ...] = ()

    def names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.keys)


@dataclass(frozen=True)
class ExtraFile:
    """A file placed in the recipe dir: either copied from `origin` or written from `text`."""

    name: str
    origin: Path | None = None
    text: str | None = None


@dataclass(frozen=True)
class RecipeModel:
    """Everything a recipe says, independent of the recipe format."""

    name: str  # may be a ``{{ key }}`` ref when the name varies with the matrix (magma-cudaXY)
    version: str
    build_number: int
    source: SourceRef
    script: Script
    requirements: Requirements = field(default_factory=Requirements)
    build_string: str | None = None  # may hold ``{{ key }}`` refs; None: the tool's default
    tests: Tests = field(default_factory=Tests)
    about: About = field(default_factory=About)
    variants: Variants = field(default_factory=Variants)
    extra_files: tuple[ExtraFile, ...] = ()
    # Big CUDA libraries: scanning them for the build prefix is slow and pointless.
    detect_binary_prefix: bool = True
    missing_dso_allowlist: tuple[str, ...] = ()
    down_prioritize: DownPrioritize | None = None
    # The recipe's `extra` section, section -> (key, value) pairs (values may hold ``{{ key }}``
    # refs). Both engines copy it into info/about.json: that is how a package records what it
    # promises (condapipe.facts.promise.promise_record), for verify to check without being told.
    extra: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    # The family whose rpath rules build.sh's last step applies to the staged prefix when condapipe
    # drives the build (condapipe.fix.staged): the engine then packs fixed files, compressed once,
    # and its own relocation is off. None (a recipe of no family): the engine relocates.
    staged_fix_family: str | None = None


# The variable condapipe sets to its staged-fix launcher (condapipe.fix.staged.ENV_VAR).
STAGED_FIX_ENV = "CONDAPIPE_STAGED_FIX"


def staged_fix_env(model: RecipeModel) -> tuple[str, ...]:
    """The variable build.sh's staged fix reads, passed into the script by both engines."""
    return (STAGED_FIX_ENV,) if model.staged_fix_family else ()


def variant_refs(text: str) -> tuple[str, ...]:
    """The variant keys a model string references, in order of first use."""
    seen: dict[str, None] = {}
    for match in VARIANT_REF.finditer(text):
        seen.setdefault(match.group(1), None)
    return tuple(seen)

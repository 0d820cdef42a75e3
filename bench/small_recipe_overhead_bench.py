#!/usr/bin/env python3
"""Benchmark: what `condapipe build RECIPE_DIR` adds to the plain engine on small real recipes.

Issue 35 asks that condapipe's overhead on a small recipe (build -> fix -> verify -> publish,
tests off) stay within 1.5 s of the plain engine. Each recipe is built, in turn and in fresh
folders, by

  plain          the engine as a user calls it: rattler-build through py-rattler-build's
                 `build_recipes` (the `rattler-build build` pipeline, tests skipped), or
                 `conda build DIR --no-test` with the real conda-build
  condapipe      `condapipe build DIR --engine ENGINE --no-test --offline` into a fresh channel,
                 once per --code tree (NAME=PATH/pipeline; default: this checkout), so the same
                 run pairs the code before a change with the code after it on the same machine

against one local dependency channel (`condapipe wheels`). The order rotates per round (plain,
A, B, then A, B, plain, ...) so drift hits every side alike. Only recipes the plain engine builds
count; a recipe condapipe refuses or fails is listed, not timed. Per recipe: median wall seconds
per side; then per engine the median over recipes and the overhead (condapipe - plain). With
--steps, the plan's own per-step seconds (report.json) are shown beside the process's wall time:
what runs before and after the plan (start-up, imports, channel probing, report) is the rest.

Recipes: the offline-buildable ones (tests/upstream_recipes.py) of rattler-build's
test-data/recipes and conda-build's tests/test-recipes checkouts (--rattler-recipes /
--conda-build-recipes, else $CONDAPIPE_UPSTREAM_RATTLER_BUILD_RECIPES /
$CONDAPIPE_UPSTREAM_CONDA_BUILD_RECIPES), plus this repository's tests/data/recipes/parity.
conda-build: $CONDAPIPE_CONDA_BUILD_VENV (a venv with conda and conda-build).

    python bench/small_recipe_overhead_bench.py --engines rattler-build --rounds 3
    python bench/small_recipe_overhead_bench.py --code before=/tmp/old/pipeline --code after=pipeline
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.upstream_recipes import select  # noqa: E402

PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
RECIPE_FILES = {"rattler-build": "recipe.yaml", "conda-build": "meta.yaml"}
TIMEOUT_S = 900

_PLAIN_RATTLER = """
import json, os, sys
from rattler_build.cli_api import build_recipes
r = json.loads(sys.argv[1])
build_recipes([r["recipe"]], output_dir=r["out"], channel=r["channels"], test="skip", no_build_id=True)
os._exit(0)
"""


@dataclass
class Recipe:
    engine: str
    path: Path
    name: str
    seconds: dict[str, list[float]] = field(default_factory=dict)
    steps: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    outcome: dict[str, str] = field(default_factory=dict)


def _packages(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob("*/*") if p.name.endswith(PACKAGE_SUFFIXES))


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    started = time.perf_counter()
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=TIMEOUT_S, check=False
    )
    return time.perf_counter() - started, proc.returncode, (proc.stdout + proc.stderr)[-1500:]


def plain(recipe: Recipe, deps: Path, scratch: Path, env: dict[str, str]) -> tuple[float, bool, str]:
    out = scratch / "plain-out"
    if recipe.engine == "rattler-build":
        request = {"recipe": str(recipe.path / "recipe.yaml"), "out": str(out), "channels": [str(deps)]}
        argv = [sys.executable, "-c", _PLAIN_RATTLER, json.dumps(request)]
    else:
        argv = ["conda", "build", str(recipe.path), "--output-folder", str(out)]
        argv += ["--croot", str(scratch / "croot"), "-c", str(out), "-c", str(deps), "--override-channels"]
        argv += ["--no-anaconda-upload", "--package-format", "conda", "--no-test"]
    seconds, code, tail = _timed(argv, env, scratch)
    return seconds, code == 0 and bool(_packages(out)), tail


def through_condapipe(
    recipe: Recipe, code: Path | None, deps: Path, scratch: Path, env: dict[str, str]
) -> tuple[float, bool, str, dict[str, float]]:
    channel, work = scratch / "channel", scratch / "work"
    argv = [
        str(Path(sys.executable).parent / "condapipe"),
        "build",
        str(recipe.path),
        "--engine",
        recipe.engine,
    ]
    argv += ["--no-test", "--offline", "-c", str(deps), "--output-dir", str(channel), "--work-dir", str(work)]
    side_env = dict(env)
    if code is not None:
        side_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH", "")]))
    seconds, rc, tail = _timed(argv, side_env, scratch)
    steps: dict[str, float] = {}
    report = work / "report.json"
    if report.is_file():
        data = json.loads(report.read_text())
        for step in data.get("steps", []):
            kind = step.get("kind", "?")
            steps[kind] = steps.get(kind, 0.0) + float(step.get("seconds") or 0.0)
        steps["plan"] = float(data.get("seconds") or 0.0)
    return seconds, rc == 0 and bool(_packages(channel)), tail, steps


def conda_env(base: dict[str, str], scratch: Path) -> dict[str, str]:
    """conda on PATH as an initialised install runs it (`python -m conda`), with its own pkgs dir."""
    venv = os.environ.get("CONDAPIPE_CONDA_BUILD_VENV")
    if not venv or not (Path(venv) / "bin" / "conda-build").is_file():
        raise SystemExit(
            "conda-build: set CONDAPIPE_CONDA_BUILD_VENV to a venv holding conda and conda-build"
        )
    bin_dir = scratch / "conda-bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "conda"
    wrapper.write_text(f'#!/bin/sh\nexec "{Path(venv) / "bin" / "python"}" -m conda "$@"\n')
    wrapper.chmod(0o755)
    return {**base, "PATH": f"{bin_dir}{os.pathsep}{base['PATH']}", "CONDA_PKGS_DIRS": str(scratch / "pkgs")}


def recipes_for(engine: str, roots: list[Path], limit: int | None) -> list[Recipe]:
    found: list[Recipe] = []
    for root in roots:
        for path in select(root, RECIPE_FILES[engine]):
            found.append(Recipe(engine, path, f"{root.name}/{path.relative_to(root)}"))
    return found[:limit] if limit else found


def run_recipe(
    recipe: Recipe, sides: list[tuple[str, Path | None]], deps: Path, base: Path, env: dict, rounds: int
) -> None:
    names = ["plain", *(name for name, _ in sides)]
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for side in order:
            scratch = Path(tempfile.mkdtemp(prefix=f"{side}-", dir=base))
            try:
                if side == "plain":
                    seconds, ok, tail = plain(recipe, deps, scratch, env)
                    steps: dict[str, float] = {}
                else:
                    code = dict(sides)[side]
                    seconds, ok, tail, steps = through_condapipe(recipe, code, deps, scratch, env)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            if not ok:
                recipe.outcome[side] = tail.strip().splitlines()[-1] if tail.strip() else "failed"
                return
            recipe.seconds.setdefault(side, []).append(seconds)
            recipe.steps.setdefault(side, []).append(steps)


def _median_steps(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({k for run in runs for k in run})
    return {k: statistics.median(run.get(k, 0.0) for run in runs) for k in keys}


def report(engine: str, recipes: list[Recipe], sides: list[str], show_steps: bool) -> list[str]:
    timed = [r for r in recipes if not r.outcome and all(s in r.seconds for s in ["plain", *sides])]
    lines = [f"### {engine}: {len(timed)} recipes timed", ""]
    head = "| recipe | plain s | " + " | ".join(f"{s} s | {s} - plain" for s in sides) + " |"
    lines += [head, "|---|---:|" + "---:|---:|" * len(sides)]
    for r in timed:
        p = statistics.median(r.seconds["plain"])
        cells = [
            f"{statistics.median(r.seconds[s]):.2f} | {statistics.median(r.seconds[s]) - p:+.2f}"
            for s in sides
        ]
        lines.append(f"| {r.name} | {p:.2f} | " + " | ".join(cells) + " |")
    if timed:
        p = statistics.median(statistics.median(r.seconds["plain"]) for r in timed)
        cells = []
        for s in sides:
            m = statistics.median(statistics.median(r.seconds[s]) for r in timed)
            over = statistics.median(
                statistics.median(r.seconds[s]) - statistics.median(r.seconds["plain"]) for r in timed
            )
            cells.append(f"**{m:.2f}** | **{over:+.2f}**")
        lines.append(f"| **median** | **{p:.2f}** | " + " | ".join(cells) + " |")
    lines.append("")
    if show_steps and timed:
        lines += ["Median seconds per plan step (report.json) and outside the plan (wall - plan):", ""]
        for s in sides:
            per = [_median_steps(r.steps[s]) for r in timed]
            keys = sorted({k for d in per for k in d})
            walls = [statistics.median(r.seconds[s]) for r in timed]
            parts = [f"{k} {statistics.median(d.get(k, 0.0) for d in per):.2f}" for k in keys]
            outside = statistics.median(w - d.get("plan", 0.0) for w, d in zip(walls, per, strict=True))
            lines.append(f"- {s}: " + ", ".join(parts) + f"; outside the plan {outside:.2f}")
        lines.append("")
    left = [r for r in recipes if r.outcome]
    if left:
        lines.append("Not timed (a side did not build a package):")
        lines += [f"- {r.name}: {side}: {why[:160]}" for r in left for side, why in r.outcome.items()]
        lines.append("")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", default="rattler-build,conda-build")
    parser.add_argument(
        "--rattler-recipes", type=Path, default=os.environ.get("CONDAPIPE_UPSTREAM_RATTLER_BUILD_RECIPES")
    )
    parser.add_argument(
        "--conda-build-recipes", type=Path, default=os.environ.get("CONDAPIPE_UPSTREAM_CONDA_BUILD_RECIPES")
    )
    parser.add_argument("--limit", type=int, help="at most this many recipes per engine")
    parser.add_argument("--only", help="comma-separated substrings of recipe names to keep")
    parser.add_argument("--rounds", type=int, default=1, help="builds of each recipe per side")
    parser.add_argument(
        "--code", action="append", default=[], metavar="NAME=PATH", help="a condapipe side per code tree"
    )
    parser.add_argument("--steps", action="store_true", help="show the plan's per-step seconds")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument(
        "--source-only",
        action="store_true",
        help="do not compile the code trees first (with PYTHONDONTWRITEBYTECODE set, every run then "
        "compiles condapipe from source, as an editable install does)",
    )
    args = parser.parse_args()

    sides: list[tuple[str, Path | None]] = []
    for item in args.code:
        name, _, path = item.partition("=")
        sides.append((name, Path(path).resolve()))
    sides = sides or [("condapipe", None)]
    base = Path(tempfile.mkdtemp(prefix="small-recipe-bench-"))
    if not args.source_only:  # as a pip install leaves it: every module's bytecode compiled once
        for tree in [REPO / "pipeline", *(path for _, path in sides if path)]:
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", str(tree)], check=True, capture_output=True
            )
    env = dict(os.environ)
    lines = [
        f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"at start; rounds {args.rounds}; sides: plain, {', '.join(n for n, _ in sides)}; "
        f"condapipe bytecode {'not compiled (source only)' if args.source_only else 'compiled first'}",
        "",
    ]
    try:
        deps = base / "deps"
        condapipe = str(Path(sys.executable).parent / "condapipe")
        subprocess.run([condapipe, "wheels", "--to", str(deps)], check=True, capture_output=True, env=env)
        for engine in args.engines.split(","):
            roots = [args.rattler_recipes if engine == "rattler-build" else args.conda_build_recipes]
            roots = [r for r in roots if r] + [REPO / "tests" / "data" / "recipes" / "parity"]
            recipes = recipes_for(engine, roots, None)
            if args.only:
                keep = [s for s in args.only.split(",") if s]
                recipes = [r for r in recipes if any(k in r.name for k in keep)]
            recipes = recipes[: args.limit] if args.limit else recipes
            engine_env = conda_env(env, base) if engine == "conda-build" else env
            for recipe in recipes:
                run_recipe(recipe, sides, deps, base, engine_env, args.rounds)
                shown = ", ".join(f"{s} {statistics.median(v):.2f}" for s, v in recipe.seconds.items())
                print(
                    f"{engine} {recipe.name}: {shown or ''} {recipe.outcome or ''}",
                    file=sys.stderr,
                    flush=True,
                )
            lines += report(engine, recipes, [n for n, _ in sides], args.steps)
        lines.append(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`condapipe-staged-fix`: the command a build script runs on its staged prefix (condapipe.fix.staged).

Not a `condapipe` subcommand: the build script reaches it through the launcher the plan writes
(condapipe.fix.staged.write_launcher). One line per warning, one summary line; a bad prefix or
package record is a one-line error with exit 2, a file that cannot be rewritten exit 1 (the
engine then stops the build).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from condapipe.errors import UsageError
from condapipe.facts.families import recipes_root
from condapipe.fix.stage_out import requested_stage
from condapipe.fix.staged import fix_staged_prefix


def main(argv: list[str] | None = None, *, recipes: str | None = None) -> int:
    """`recipes`: the family registry folder the plan that wrote the launcher read (None: the
    installed one)."""
    if recipes is not None:
        with recipes_root(Path(recipes)):
            return main(argv)
    parser = argparse.ArgumentParser(prog="condapipe-staged-fix", description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="default", help="whose rpath rules (default: the registry's)")
    parser.add_argument("--prefix", required=True, type=Path)
    parser.add_argument("--build-prefix", action="append", default=[])
    parser.add_argument(
        "--stage-out", type=Path, help="move the fixed new files here (default: as requested)"
    )
    args = parser.parse_args(argv)
    if args.stage_out is None:  # pack_from_stage (issue 35): the engine adapter's request
        args.stage_out = requested_stage(args.prefix)
    try:
        report = fix_staged_prefix(args.prefix, args.family, tuple(p for p in args.build_prefix if p))
    except UsageError as exc:
        print(f"condapipe: staged fix: error: {exc}", file=sys.stderr)
        return 2
    for warning in report.warnings:
        print(f"condapipe: staged fix: warning: {warning}")
    if report.errors:
        for error in report.errors:
            print(f"condapipe: staged fix: error: {error}", file=sys.stderr)
        return 1
    if args.stage_out is not None:
        from condapipe.fix.stage_out import move_payload_out, record_fix
        from condapipe.fix.staged import staged_options
        from condapipe.plan.code_inputs import staged_fix_digest

        try:
            moved, kept = move_payload_out(args.prefix, args.stage_out)
            # what was fixed, with which rules and code: the fix step need not unpack to check again
            recorded = record_fix(args.stage_out, report, staged_options(args.family), staged_fix_digest())
        except (UsageError, OSError) as exc:
            print(f"condapipe: staged fix: error: moving the payload out: {exc}", file=sys.stderr)
            return 2
        if recorded is None:
            print("condapipe: staged fix: a payload ELF file was not checked here; the fix step checks all")
        print(f"condapipe: staged fix: {moved} new files moved to {args.stage_out} for condapipe to pack")
        if kept:  # what the engine's snapshot would also leave out (rattler's CACHEDIR.TAG, post-link output)
            shown = ", ".join(kept[:5]) + (f" and {len(kept) - 5} more" if len(kept) > 5 else "")
            print(f"condapipe: staged fix: left as there before the build script: {shown}")
    print(
        f"condapipe: staged fix ({args.family}): {len(report.changed)} of {len(report.files)} new ELF "
        f"files rewritten before packing in {report.elapsed_s:.1f} s"
    )
    return 0

"""Run with the real conda-build's Python: render and check recipes, one process for all of them.

    python conda_render_check.py CHANNEL_URL CROOT RECIPE_DIR...

For each recipe: `conda_build.api.render` (what `conda render` runs) with the recipe's own
conda_build_config.yaml and only CHANNEL_URL as channel, an unsolvable build/host refused as `conda
build` refuses it (`conda render` alone only warns and prints the recipe unsolved); then
`check_fields()` on every rendered variant (what `conda build --check` adds: its api.check is
render + check_fields). One JSON line per recipe on stdout: {"recipe", "ok", "error"?, "outputs":
[{"name", "version", "build", "build_number", "requirements", "check", "final"}]}; ok: every variant
checked and solved ("final"). Loading conda once, not once per recipe and command, keeps this fast.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    from conda_build import api
    from conda_build.config import get_or_merge_config

    channel, croot, *recipes = argv
    for recipe in recipes:
        config = get_or_merge_config(
            None, channel_urls=[channel], override_channels=True, croot=croot, verbose=False
        )
        try:
            rendered = api.render(recipe, config=config, permit_unsatisfiable_variants=False)
            outputs = []
            for meta, _, _ in rendered:
                outputs.append(
                    {
                        "name": meta.name(),
                        "version": meta.version(),
                        "build": meta.build_id(),
                        "build_number": meta.build_number(),
                        "requirements": meta.get_section("requirements"),
                        "check": bool(meta.check_fields()),
                        # False when a dependency could not be solved: conda render then only warns
                        # and returns the unsolved recipe; here that is a failure.
                        "final": bool(meta.final),
                    }
                )
            line = {
                "recipe": recipe,
                "ok": bool(outputs) and all(o["check"] and o["final"] for o in outputs),
                "outputs": outputs,
            }
        except BaseException as exc:  # the real tool's own error (SystemExit included) is the result
            line = {"recipe": recipe, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(line, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Whether a rendered variant of a v1 recipe is skipped (`build: skip:`), as the rattler-build CLI decides.

py-rattler-build's render drops the skipped outputs of a multi-output recipe, but a single-output
recipe's skip is evaluated into a field it neither exposes nor honours: `run_build` builds it
anyway, where `rattler-build build` builds nothing. condapipe asks the engine itself what the
conditions say (never a Jinja of its own): the skip list becomes the run requirements of a probe
recipe, rendered with the same context, variant values and platform, where a condition that holds
renders as the requirement SKIP_YES.
"""

from __future__ import annotations

import json
from typing import Any

SKIP_YES = "condapipe-skip-yes"
SKIP_NO = "condapipe-skip-no"


def _probe_item(item: Any) -> Any:
    """One entry of `build.skip` as a probe requirement (an if/then/else entry keeps its shape)."""
    if isinstance(item, dict) and "if" in item:
        probe: dict[str, Any] = {"if": item["if"], "then": _probe_list(item.get("then"))}
        if item.get("else") is not None:
            probe["else"] = _probe_list(item.get("else"))
        return probe
    text = str(item).strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2].strip()
    if text.lower() in ("true", "false"):
        text = text.lower()
    return f'${{{{ "{SKIP_YES}" if ({text}) else "{SKIP_NO}" }}}}'


def _probe_list(value: Any) -> list[Any]:
    items = value if isinstance(value, list) else [value] if value is not None else []
    return [_probe_item(item) for item in items]


def skip_conditions(stage0: dict[str, Any]) -> list[Any]:
    """The top-level skip list of a single-output recipe ([] for a multi-output one: the engine's
    render already leaves its skipped outputs out)."""
    if stage0.get("outputs"):
        return []
    build = stage0.get("build") or {}
    skip = build.get("skip") if isinstance(build, dict) else None
    if skip is None or skip is False:
        return []
    return skip if isinstance(skip, list) else [skip]


def is_skipped(stage0: dict[str, Any], variant: dict[str, Any], render_config: Any) -> bool:
    """True when the recipe's skip conditions hold for `variant` (its used keys and values)."""
    import rattler_build as rb

    conditions = skip_conditions(stage0)
    if not conditions:
        return False
    probe = {
        "context": stage0.get("context") or {},
        "package": {"name": "condapipe-skip-probe", "version": "0"},
        "requirements": {"run": _probe_list(conditions)},
    }
    keys = {k: [v] for k, v in variant.items() if k != "target_platform"}
    recipe = rb.Stage0Recipe.from_yaml(json.dumps(probe))
    for rendered in recipe.render(rb.VariantConfig(keys), render_config):
        run = (rendered.recipe.to_dict().get("requirements") or {}).get("run") or []
        if SKIP_YES in [str(r) for r in run]:
            return True
    return False

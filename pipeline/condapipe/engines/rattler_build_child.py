"""The rattler-build engine's own process: renders and builds one v1 recipe with py-rattler-build.

condapipe starts this as a fresh interpreter (`python -m condapipe.engines.rattler_build_child`,
never a fork) so that what the engine holds ends with it: the GiBs it uses while it packs a large
package, the build's threads and a crash of its native code (a Rust panic, a segfault) are this
process's, not condapipe's. The build's environment is this process's, set by condapipe when it
starts it (condapipe's own never changes).

The request comes as one JSON object on stdin (no secret ever reaches argv); stdin is then
/dev/null. Everything goes back on stdout, which is also stderr: one line per message, MARK then a
JSON object; any other line is something native code printed, which condapipe logs as it came.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from condapipe.engines.engine_process import MARK
from condapipe.engines.recipe_skip import is_skipped
from condapipe.engines.recipe_variants import load_variant_config
from condapipe.engines.render_error import engine_message


def send(event: str, **fields: Any) -> None:
    """Write one message to condapipe; if condapipe is gone, stop this build (nobody reads it)."""
    data = (MARK + json.dumps({"event": event, **fields}) + "\n").encode("utf-8", errors="replace")
    try:
        while data:
            data = data[os.write(1, data) :]
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            os.killpg(0, signal.SIGKILL)  # this process group: this process and the build script
        os._exit(1)


class LogForwarder:
    """py-rattler-build progress callback that sends every log event to condapipe's BuildLog."""

    def on_log(self, event: object) -> None:
        level = getattr(event, "level", "info")
        style = {"error": "red", "warn": "yellow"}.get(level)
        send("log", text=str(getattr(event, "message", "")), style=style)

    def on_build_step(self, event: object) -> None:
        text = f"== {getattr(event, 'step_name', '')}: {getattr(event, 'message', '')}"
        send("log", text=text, style="bold")

    def on_download_start(self, event: object) -> None:
        send("log", text=f"download {getattr(event, 'url', '')}", style=None)

    def on_download_progress(self, event: object) -> None:
        return None

    def on_download_complete(self, event: object) -> None:
        return None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _variant_text(variant: dict[str, Any]) -> str:
    """`python 3.10, target_platform linux-64`: the variant a skip held for."""
    return ", ".join(f"{key} {value}" for key, value in sorted(variant.items()))


def build(request: dict[str, Any]) -> None:
    """Render the recipe and build every variant; ends with exactly one ending message."""
    import rattler_build as rb

    recipe_path = Path(request["recipe"])
    try:
        recipe = rb.Stage0Recipe.from_file(recipe_path)
    except rb.RattlerBuildError as exc:
        send("usage", message=f"cannot parse {request['shown_recipe']}: {engine_message(str(exc))}")
        return
    variant_config = rb.VariantConfig()
    for file in [request["variants"], *request.get("variant_files", [])]:
        if not file:
            continue
        try:
            variant_config = variant_config.merge(load_variant_config(Path(file), request["target_platform"]))
        except rb.RattlerBuildError as exc:
            send("usage", message=f"cannot parse {file}: {engine_message(str(exc))}")
            return
    if request["pythons"]:
        variant_config = variant_config.merge(rb.VariantConfig({"python": list(request["pythons"])}))
    render_config = None
    if request["target_platform"]:
        platform = rb.PlatformConfig(target_platform=request["target_platform"])
        render_config = rb.RenderConfig(platform=platform)
    tool_config = rb.ToolConfiguration(
        test_strategy="native" if request["run_tests"] else "skip",
        compression_threads=request.get("compression_threads"),
    )
    try:
        variants = list(recipe.render(variant_config, render_config))
    except rb.RattlerBuildError as exc:
        send("usage", message=f"cannot render {request['shown_recipe']}: {engine_message(str(exc))}")
        return
    stage0 = recipe.to_dict()
    send("started", version=rb.rattler_build_version())
    built: list[str] = []
    skipped: list[str] = []
    try:
        for variant in variants:
            if is_skipped(stage0, dict(variant.variant), render_config):
                name = variant.recipe.package.name
                skipped.append(f"{name} ({_variant_text(dict(variant.variant))})")
                send("log", text=f"skipping {name}: build/skip holds for {dict(variant.variant)}")
                continue
            if (variant.recipe.to_dict().get("build") or {}).get("merge_build_and_host_envs"):
                built.extend(build_merged(request))
                continue
            result = variant.run_build(
                tool_config=tool_config,
                output_dir=Path(request["output_dir"]),
                channels=list(request["channels"]),
                progress_callback=LogForwarder(),
                package_format=request["package_format"],
                no_build_id=True,
            )
            built.extend(str(p) for p in result.packages)
    except rb.RattlerBuildError as exc:
        send("failed", message=str(exc))
        return
    send("built", packages=built, skipped=skipped)


def build_merged(request: dict[str, Any]) -> list[str]:
    """A variant with `merge_build_and_host_envs: true`, built through rattler-build's own build
    pipeline: py-rattler-build's run_build sets its folders up without the merge (BUILD_PREFIX
    stays a separate build_env, which such a recipe's script rightly refuses). That pipeline builds
    the recipe's variants itself; the packages are the ones it leaves in the output folder."""
    import warnings

    from rattler_build.cli_api import build_recipes

    out = Path(request["output_dir"])
    before = {str(p) for p in out.glob("*/*.conda")} | {str(p) for p in out.glob("*/*.tar.bz2")}
    send("log", text="merge_build_and_host_envs: building with rattler-build's build pipeline")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        build_recipes(
            [request["recipe"]],
            output_dir=out,
            channel=list(request["channels"]),
            variant_config=[f for f in [request["variants"], *request.get("variant_files", [])] if f] or None,
            variant_overrides={"python": list(request["pythons"])} if request["pythons"] else None,
            target_platform=request["target_platform"],
            test="native" if request["run_tests"] else "skip",
            package_format=request["package_format"],
            compression_threads=request.get("compression_threads"),
            no_build_id=True,
            skip_existing="local",
        )
    after = {str(p) for p in out.glob("*/*.conda")} | {str(p) for p in out.glob("*/*.tar.bz2")}
    return sorted(after - before)


def main() -> int:
    # condapipe decides what a Ctrl-C stops, and stops this process group itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        request = json.loads(sys.stdin.read())
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        build(request)
    except BaseException as exc:  # one line back to condapipe, never a traceback (a Rust panic too)
        send("error", message=f"{type(exc).__name__}: {first_line(exc)}")
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    # py-rattler can abort the interpreter while it shuts down after work that succeeded
    # (see condapipe.cli.main): end without the library's teardown.
    os._exit(code)

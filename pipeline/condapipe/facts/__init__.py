"""Shared library: the facts every stage reads, apart from any command's settings.

The data tables (condapipe/data: CUDA, PyTorch and torchvision releases, run_exports, compile-job
memory), the GPU arch lists and their parser, the family registry and profiles
(recipes/families.yaml, recipes/<family>/family.yaml) and the Jetson boards. Nothing here reads
flags, the config file or the environment's settings, and nothing imports condapipe.buildspec:
a step that only needs a fact (fix's rpath rules, verify's promised archs) does not load, and is
not re-run by a change to, the settings cascade.

Entry points are the modules themselves (`tables`, `families`, `arch`, `jetson`, ...); this
package imports none of them, so reading one fact loads only its module.
"""

# What conda-build sets for a test, and where it puts test/source_files.
import os
import sys

assert os.environ["PKG_NAME"] == "parity-test-variables", os.environ.get("PKG_NAME")
assert os.environ["PKG_VERSION"] == "1.10", os.environ.get("PKG_VERSION")  # a string, not 1.1
assert os.environ["CONDA_PY"] == f"{sys.version_info[0]}{sys.version_info[1]}", os.environ.get("CONDA_PY")
assert os.environ["PY_VER"] == f"{sys.version_info[0]}.{sys.version_info[1]}", os.environ.get("PY_VER")
assert os.path.isdir(os.environ["SP_DIR"]), os.environ.get("SP_DIR")
assert os.path.isfile(os.path.join(os.environ["SRC_DIR"], "setup.cfg")), os.environ.get("SRC_DIR")

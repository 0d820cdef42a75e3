"""doctor: machine checks before a build.

Entry point: `run_doctor(spec, Machine.from_environ(work_dir, settings.environ))` -> DoctorReport
(findings, the build env they imply, toolkit switches). `machine.py` holds what doctor reads, `checks.py` the
checks, `run.py` the runner and `find_toolkits` (the CUDA toolkits --cuda defaults come from).
"""

from condapipe.doctor.machine import Finding, Machine
from condapipe.doctor.run import DoctorReport, find_toolkits, run_doctor

__all__ = ["DoctorReport", "Finding", "Machine", "find_toolkits", "run_doctor"]

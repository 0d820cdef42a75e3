"""A local fake of anaconda.org's upload API, and real tiny conda packages, for upload tests."""

from fake_anaconda.packages import make_package
from fake_anaconda.server import Dist, FakeAnaconda, Fault, Request

__all__ = ["Dist", "FakeAnaconda", "Fault", "Request", "make_package"]

"""verify: hashes, prefixes, linkage and CUDA archs of a package before it is published.

Entry point: `verify_package` (package -> VerifyReport); `verify_tree` checks an unpacked one.
"""

from condapipe.verify.verifier import VerifyReport, verify_package, verify_tree

__all__ = ["VerifyReport", "verify_package", "verify_tree"]

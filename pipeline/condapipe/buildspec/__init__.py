"""buildspec: config file, environment and flags -> one frozen Settings per command and one
validated, fully resolved BuildSpec.

Entry points: `resolve_settings` (the cascade: defaults → config file → environment → flags) with
`Settings`, `build_spec` / `spec_from_settings` (settings -> BuildSpec) and the resolved
`CudaVariant`. The facts a spec is checked against (data tables, arch lists, the family registry)
are the facts library's (condapipe.facts), which imports no settings. Flags themselves are the
CLI's (condapipe.cli.flags): nothing here parses a command line or prints.
"""

from condapipe.buildspec.build_spec import BuildSpec, Source, build_spec
from condapipe.buildspec.settings import Settings, resolve_settings, spec_from_flags, spec_from_settings
from condapipe.buildspec.variant import CudaVariant

__all__ = [
    "BuildSpec",
    "CudaVariant",
    "Settings",
    "Source",
    "build_spec",
    "resolve_settings",
    "spec_from_flags",
    "spec_from_settings",
]

"""buildspec: config file, environment, flags and data tables -> one frozen Settings per command and
one validated, fully resolved BuildSpec.

Entry points: `resolve_settings` (the cascade: defaults → config file → environment → flags) with
`Settings`, `build_spec` / `spec_from_settings` (settings -> BuildSpec), arch lists (`ArchList`,
`parse_arch_list`) and the family rules (`known_packages`, `family_rules`). Flags themselves are
the CLI's (condapipe.cli.flags): nothing here parses a command line or prints.
"""

from condapipe.buildspec.arch import ArchList, parse_arch_list
from condapipe.buildspec.build_spec import BuildSpec, Source, build_spec
from condapipe.buildspec.families import family_rules, known_packages
from condapipe.buildspec.settings import Settings, resolve_settings, spec_from_flags, spec_from_settings
from condapipe.buildspec.variant import CudaVariant

__all__ = [
    "ArchList",
    "BuildSpec",
    "CudaVariant",
    "Settings",
    "Source",
    "build_spec",
    "family_rules",
    "known_packages",
    "parse_arch_list",
    "resolve_settings",
    "spec_from_flags",
    "spec_from_settings",
]

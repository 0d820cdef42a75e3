"""spec: flags, config file and data tables -> one validated, fully resolved BuildSpec.

Entry points: `build_spec` (settings -> BuildSpec), the click flags (`spec_options`,
`spec_from_cli`, `resolve_package`), the config file (`load_config`, `upload_settings`), arch lists
(`ArchList`, `parse_arch_list`) and the family rules (`known_packages`, `family_rules`).
"""

from condapipe.buildspec.arch import ArchList, parse_arch_list
from condapipe.buildspec.build_spec import BuildSpec, Source, build_spec
from condapipe.buildspec.config_file import load_config, upload_settings
from condapipe.buildspec.families import family_rules, known_packages
from condapipe.buildspec.options import resolve_package, spec_from_cli, spec_options
from condapipe.buildspec.variant import CudaVariant

__all__ = [
    "ArchList",
    "BuildSpec",
    "CudaVariant",
    "Source",
    "build_spec",
    "family_rules",
    "known_packages",
    "load_config",
    "parse_arch_list",
    "resolve_package",
    "spec_from_cli",
    "spec_options",
    "upload_settings",
]

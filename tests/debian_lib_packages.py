"""Conda packages of a C library made from this machine's Debian binary packages (test setup only).

The torchvision recipe asks for libpng, libjpeg-turbo and libwebp-base in its host and run
environments, as conda-forge names them. No conda channel is reachable here, so the opt-in real build
takes them from Debian's own binary packages (`apt-get download`, never installed): each .deb's
`usr/lib/<multiarch>/`, `usr/include/` and `usr/bin/` laid out as a conda prefix's lib/, include/ and
bin/, and a *-config script's hard-coded /usr rewritten to the prefix placeholder so conda relocates
it. What is built with them links the same sonames conda-forge's packages provide.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from condapipe.package.conda_writer import PREFIX_PLACEHOLDER, PackageFile, index_json, write_conda

MULTIARCH = "usr/lib/x86_64-linux-gnu/"


def _prefix_path(member: str) -> str | None:
    """Where a file of the .deb goes in a conda prefix, or None for what a library package drops."""
    if member.startswith(MULTIARCH) and "/pkgconfig/" not in member and "/cmake/" not in member:
        return "lib/" + member[len(MULTIARCH) :]
    if member.startswith("usr/include/x86_64-linux-gnu/"):  # jconfig.h: Debian's multiarch headers
        return "include/" + member[len("usr/include/x86_64-linux-gnu/") :]
    if member.startswith("usr/include/"):
        return "include/" + member[len("usr/include/") :]
    if member.startswith("usr/bin/"):
        return "bin/" + member[len("usr/bin/") :]
    return None


def _config_script(data: bytes) -> bytes:
    """libpng-config: its prefix (/usr) and multiarch libdir as the conda prefix and its lib/."""
    text = data.decode()
    text = text.replace('prefix="/usr"', f'prefix="{PREFIX_PLACEHOLDER}"')
    text = text.replace("${prefix}/lib/x86_64-linux-gnu", "${prefix}/lib")
    # Debian disables --libdir (it prints a refusal on stdout); a conda prefix has one lib/.
    text = text.replace("\nlibdir=\n", '\nlibdir="${prefix}/lib"\n')
    text = re.sub(r'\n\s*echo >&1 "[^"\n]*option is disabled in Debian/Ubuntu"\n\s*exit 1\n', "\n", text)
    return text.encode()


def deb_conda_package(name: str, version: str, debs: list[Path], channel_subdir: Path) -> Path:
    """One conda package `name` holding the library files of `debs` (runtime + -dev)."""
    files: dict[str, PackageFile] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", str(deb), scratch], check=True)
        root = Path(scratch)
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).as_posix()
            dest = _prefix_path(rel)
            if dest is None or (path.is_dir() and not path.is_symlink()):
                continue
            if path.is_symlink():
                target = path.readlink().as_posix()
                if target.startswith("/") or ".." in target:  # e.g. /lib/... links: not relocatable
                    continue
                files[dest] = PackageFile(dest, link_target=target)
                continue
            data = path.read_bytes()
            script = dest.startswith("bin/") and data.startswith(b"#!") and b'prefix="/usr"' in data
            if script:
                data = _config_script(data)
            files[dest] = PackageFile(
                dest, data, executable=bool(path.stat().st_mode & 0o111), has_prefix=script
            )
    index = index_json(name, version, "debian_0", channel_subdir.name, (), "see the Debian package")
    about = {"summary": f"{name} from Debian's binary packages {', '.join(d.name for d in debs)}"}
    return write_conda(channel_subdir, index, list(files.values()), about)

#!/usr/bin/env python3
"""Make a fresh conda environment from local channels with py-rattler, as a user would install a
built package (`conda create -p PREFIX -c CHANNEL... SPEC...`), with no conda on the machine.

Prints each installed package as name=version=build, one a line. Channels are folders (a channel
made by `condapipe build` / `condapipe wheels`); nothing is fetched from the network.

usage: fresh_env.py PREFIX --channel DIR [--channel DIR ...] SPEC [SPEC ...]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import rattler


async def _create(prefix: Path, channels: list[Path], specs: list[str], cache: Path) -> list[str]:
    # Specs are read as conda reads them (MatchSpec's lenient parse, as condapipe's resolve does):
    # "torchvision 0.21.0" and an exact pin with a dotted build string both solve; the solver's own
    # string parse is strict and refuses them.
    records = await rattler.solve(
        [rattler.Channel(str(c.resolve())) for c in channels],
        [rattler.MatchSpec(spec) for spec in specs],
        platforms=["linux-64", "noarch"],
    )
    await rattler.install(records, prefix, cache_dir=cache, show_progress=False)
    return sorted(f"{r.name.normalized}={r.version}={r.build}" for r in records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix", type=Path)
    parser.add_argument("--channel", type=Path, action="append", required=True)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("specs", nargs="+")
    args = parser.parse_args()
    if args.prefix.exists():
        print(f"fresh_env: {args.prefix} exists; name a new folder", file=sys.stderr)
        return 2
    cache = args.cache or args.prefix.parent / f".{args.prefix.name}-pkgs"
    try:
        for line in asyncio.run(_create(args.prefix, args.channel, args.specs, cache)):
            print(line)
    except Exception as exc:  # solver and install errors: one line, as condapipe reports them
        print(
            f"fresh_env: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    from rattler_teardown import exit_now  # scripts/: py-rattler may crash at teardown

    exit_now(main())

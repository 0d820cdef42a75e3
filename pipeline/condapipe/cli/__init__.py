"""cli: the click group, one module per command, and all console output.

The only layer that prints: stages report through callbacks and consoles passed in from here
(`condapipe.cli.output`). Entry point: `main`, the `condapipe` click group; each command's module
is imported only when that command runs, so `condapipe --help` stays fast. (So the attribute
`condapipe.cli.main` is this group; the module's other names import as `from condapipe.cli.main ...`.)
"""

from condapipe.cli.main import main

__all__ = ["main"]

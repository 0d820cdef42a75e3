"""One module per CLI command; each exposes `command` (a click.Command)."""

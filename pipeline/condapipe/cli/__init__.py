"""cli: the click group, one module per command, and all console output."""

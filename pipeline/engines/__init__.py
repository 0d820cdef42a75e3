"""Build engines: conda-build and rattler-build behind one protocol."""

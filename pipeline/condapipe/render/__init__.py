"""render: BuildSpec -> a recipe directory (conda-build v0 and rattler-build v1) from one model."""

"""spec: flags, config file and data tables -> one validated, fully resolved BuildSpec."""

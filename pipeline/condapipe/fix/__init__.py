"""fix: ELF post-processing (rpaths, vendoring) and package I/O (safe unpack, streaming repack)."""

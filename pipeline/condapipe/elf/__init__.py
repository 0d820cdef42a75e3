"""ELF post-processing: rpaths, vendoring, fatbin inspection."""

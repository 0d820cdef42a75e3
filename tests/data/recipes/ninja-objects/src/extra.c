/* The file the recipe's patch changes: a patch edit recompiles this object only. */
unsigned extra_value(void) { return 1u; }

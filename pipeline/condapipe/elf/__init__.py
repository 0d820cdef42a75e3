"""Shared library: read-only ELF parsing (dynamic table, fatbins and their cubin/PTX payloads, static
archives) and the rpath vocabulary, used by fix (to patch), verify (to check) and the tests.

Writers live in fix/: nothing here changes a file.
"""

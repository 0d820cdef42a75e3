"""Shared library: conda package files (.conda and .tar.bz2) read, written and unpacked safely.

Used by fix (repack), verify (read) and publish (index, upload); no stage owns it.
"""

"""Shared library: conda package files (.conda and .tar.bz2) read, written and unpacked safely, and
the index (repodata) of a local channel of them.

Used by fix (repack), verify (read), inputchannels (write, index) and publish (index, upload); no
stage owns it.
"""

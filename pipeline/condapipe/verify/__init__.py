"""verify: hashes, prefixes, linkage and CUDA archs of a package before it is published."""

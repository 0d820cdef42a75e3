"""publish: local channels (lock, atomic copy, index) and anaconda.org upload."""

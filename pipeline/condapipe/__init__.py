"""condapipe: build custom PyTorch and magma-cuda conda packages end to end."""

__version__ = "0.1.0"

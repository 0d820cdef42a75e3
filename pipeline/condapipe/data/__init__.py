"""Data tables (per CUDA version, per PyTorch version range)."""

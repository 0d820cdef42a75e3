"""Recipe templates shipped with condapipe (one folder per package family)."""

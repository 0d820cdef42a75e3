"""plan: ordered, resumable build steps, their state file, progress and report."""

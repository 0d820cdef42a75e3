"""Version-scoped source patches; see index.yaml."""

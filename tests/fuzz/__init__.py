"""The CLI fuzz harness: hostile archives (archives.py) and the campaign runner (campaign.py)."""

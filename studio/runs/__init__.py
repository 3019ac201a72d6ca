"""The Runs tab, and the studio's HTTP API over runs (api.py)."""

"""The Monitor tab, and the live charts it is fed outside Gradio's events (live.py, routes.py)."""

"""The studio in several languages: the words and the keys in use (catalog.py), the page's side (widgets.py),
and the engine's messages said again (problems.py)."""

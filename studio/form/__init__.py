"""The config form: one field spec per RunConfig field (schema.py), and the widgets built from it (widgets.py)."""

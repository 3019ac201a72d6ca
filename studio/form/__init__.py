"""The config form: one field spec per RunConfig field (schema.py), widget values and config values both ways
(values.py), the text of a list of datasets or rewards (yaml_lists.py), the form's config with its paths confined
(run_config.py), and the widgets built from it all (widgets.py)."""

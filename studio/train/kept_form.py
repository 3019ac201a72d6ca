"""The Train form kept in the browser: what a reload brings back.

The page stores the form's values in the browser's own storage (localStorage, by a script wired in
studio.train.tab) on every change and sends them back once when it loads again, as the language is kept. What comes
back is a visitor's own input, so it is read as the form reads a loaded config: only the fields the form has, each
of a kind its widget shows, a choice among its choices, and in demo mode with the fields the demo fixes set back.
Nothing is trusted more than typing the same values would be: Start validates them again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.api import INIT_FROM_FIELD
from studio.demo.caller import Caller
from studio.form.schema import FieldSpec, leaf_specs
from studio.train.actions import upload_names, upload_paths

STORAGE_KEY = "ts-train-form"  # the browser's localStorage key
# Set on <html> (data-form-ready) once the kept form is restored: what is typed before then may be replaced by the
# stored form when the page loads slowly (the browser tests wait for it before they type).
FORM_READY = "formReady"
# The page's scripts: read the stored form as the page loads (beside the visitor), and mark the restore done.
READ_SCRIPT = f"(visitor, _stored) => [visitor, localStorage.getItem({json.dumps(STORAGE_KEY)})]"
READY_SCRIPT = f"() => {{ document.documentElement.dataset.{FORM_READY} = '1'; }}"
# A run to continue from is not brought back: it may be gone, and continuing is a choice made for one run.
NOT_KEPT = (INIT_FROM_FIELD,)
_SCALARS = (str, int, float, bool, type(None))


def parse_stored(text: str | None) -> Any:
    """What the page stored (a JSON text), or None when it holds nothing readable."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def restored_values(caller: Caller, stored: Any) -> dict[str, Any]:
    """The widget values to show from what the browser ``stored`` ({} when it holds nothing usable)."""
    if not isinstance(stored, Mapping):
        return {}
    values = {
        spec.path: stored[spec.path]
        for spec in leaf_specs()
        if spec.path in stored and spec.path not in NOT_KEPT and _fits(spec, stored[spec.path])
    }
    if caller.policy.enabled:
        values, _ = caller.policy.restrict_values(upload_paths(caller, values), caller.uploads)
        values = upload_names(caller, values)
    return values


def _fits(spec: FieldSpec, value: Any) -> bool:
    """Whether ``value`` is something ``spec``'s widget can show (not whether the config accepts it)."""
    if spec.kind == "bool":
        return isinstance(value, bool)
    if spec.kind in ("int", "float") and not spec.text_number:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec.kind == "choice" and spec.choices:
        return value in spec.choices or (spec.optional and value == "")
    if spec.kind == "choices":
        return isinstance(value, list) and all(item in spec.choices for item in value)
    if isinstance(value, list):
        return all(isinstance(item, _SCALARS) for item in value)
    return isinstance(value, _SCALARS)


def store_script(paths: list[str]) -> str:
    """The page's script that stores the form's values (in the order of ``paths``) on every change."""
    return f"""(...values) => {{
      const paths = {json.dumps(paths)};
      const kept = {{}};
      paths.forEach((path, i) => {{ kept[path] = values[i]; }});
      try {{ localStorage.setItem({json.dumps(STORAGE_KEY)}, JSON.stringify(kept)); }} catch (error) {{}}
      return [];
    }}"""

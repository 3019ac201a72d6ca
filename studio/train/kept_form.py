"""The Train form kept in the browser: what a reload brings back.

The page stores the form's values in the browser's own storage (localStorage, by the script that runs before each
live preview, wired in studio.train.tab) after every change and sends them back once when it loads again, as the
language is kept. What comes back is a visitor's own input, so it is read as the form reads a loaded config: only the
fields the form has, each of a kind its widget shows, a choice among its choices, and in demo mode with the fields
the demo fixes set back.
Nothing is trusted more than typing the same values would be: Start validates them again.

The restore's answer comes back from the server while the visitor may already be typing (a slow page), so it does
not write the widgets itself: the page applies it (``apply_script``) and leaves every field the visitor has changed
since the page loaded as it is. The page notes those fields itself (``read_script``, run as the page loads) from
the visitor's own input events only: the store script runs after every change, the restore's and a preset's too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.api import INIT_FROM_FIELD
from studio.demo.caller import Caller
from studio.form.schema import FieldSpec, leaf_specs
from studio.train.actions import upload_names, upload_paths

STORAGE_KEY = "ts-train-form"  # the browser's localStorage key
# Set on <html> (data-form-ready) once the kept form is restored, by the page's READY_SCRIPT: the browser tests wait
# for it to see what came back.
FORM_READY = "formReady"
READY_SCRIPT = f"() => {{ document.documentElement.dataset.{FORM_READY} = '1'; }}"
# The page's own record of the fields the visitor has changed since it loaded (a Set of paths on window).
TOUCHED = "tsKeptFormTouched"
# Keys that change a field without an input event of its own: a dropdown's pick, a token removed from a list.
CHANGING_KEYS = ("Enter", "Backspace", "Delete")
# What a pointer presses to change a field without an input event of its own: a dropdown's option, a clear button.
PICKS = "[role=option], button, [role=button]"
# A run to continue from is not brought back: it may be gone, and continuing is a choice made for one run.
NOT_KEPT = (INIT_FROM_FIELD,)
_SCALARS = (str, int, float, bool, type(None))

if TYPE_CHECKING:  # the widgets are built in studio.train.tab; here only their ids and postprocess are read
    import gradio as gr


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
        values, _ = caller.policy.restrict_values(upload_paths(caller, values), caller.uploads, caller.owns_run_id)
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
    """The page's script that stores the form's values before each live preview (the preview's ``js``: it follows
    every input of the visitor's and every write of the studio's, so it sees every change). It takes the preview's
    inputs, the form's values last in the order of ``paths``, and hands them on unchanged."""
    return f"""(...inputs) => {{
      const paths = {json.dumps(paths)};
      const values = inputs.slice(inputs.length - paths.length);
      const kept = {{}};
      paths.forEach((path, i) => {{ kept[path] = values[i]; }});
      try {{ localStorage.setItem({json.dumps(STORAGE_KEY)}, JSON.stringify(kept)); }} catch (error) {{}}
      return inputs;
    }}"""


def read_script(components: Mapping[str, gr.components.Component]) -> str:
    """The page's script run as it loads (the restore's ``js``): it starts noting the fields the visitor changes
    (``components``: path -> the field's widget, found in the page by its ``elem_id``) and reads the stored form,
    which it sends beside the visitor."""
    fields = {component.elem_id: path for path, component in components.items() if component.elem_id}
    return f"""(visitor, _stored) => {{
      if (!window.{TOUCHED}) {{
        const touched = window.{TOUCHED} = new Set();
        const fields = new Map(Object.entries({json.dumps(fields)}));
        const note = (event) => {{
          // Only the visitor's own doing: a script's update (the restore, a preset, a loaded config) is untrusted
          // or fires no DOM event at all.
          if (!event.isTrusted) return;
          const path = event.composedPath();
          const field = path.find((node) => node instanceof Element && fields.has(node.id));
          if (!field) return;
          // A click that only opens or focuses a field, or Tab and the arrows moving through it, change nothing.
          if (event.type === 'pointerdown' && !path.some((node) => node instanceof Element && node.matches(
            {json.dumps(PICKS)}))) return;
          if (event.type === 'keydown' && !{json.dumps(CHANGING_KEYS)}.includes(event.key)) return;
          touched.add(fields.get(field.id));
        }};
        for (const type of ['input', 'change', 'pointerdown', 'keydown']) {{
          document.addEventListener(type, note, true);
        }}
      }}
      return [visitor, localStorage.getItem({json.dumps(STORAGE_KEY)})];
    }}"""


def restored_text(components: Mapping[str, gr.components.Component], values: Mapping[str, Any]) -> str:
    """``values`` (from ``restored_values``) as the widgets show them, in a JSON text for ``apply_script``: each
    goes through its widget's ``postprocess``, as an event's output does."""
    return json.dumps({path: components[path].postprocess(value) for path, value in values.items()})


def apply_script(paths: list[str]) -> str:
    """The page's script that shows the restored form (``restored_text``) in the widgets of ``paths``: a field
    the visitor has changed since the page loaded keeps what it holds, and so does a field not restored."""
    return f"""(restored) => {{
      const values = JSON.parse(restored || '{{}}');
      const touched = window.{TOUCHED} || new Set();
      const kept = {{__type__: 'update'}};  // an update that changes nothing (Python's gr.skip())
      return {json.dumps(paths)}.map((path) => (
        touched.has(path) || !Object.hasOwn(values, path) ? kept : values[path]));
    }}"""

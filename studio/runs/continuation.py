"""The Runs tab's "Continue from this run": the Train form's values that start a new run from a finished one.

No Gradio here. The form gets ``model.init_from`` and the source's model, quantization and adapter settings (a LoRA
adapter trains further as it is: engine.runs.lineage refuses other adapter settings); the method, data and
training loop stay as the form has them, since continuing usually changes them (SFT, then DPO on preference pairs).
"""

from __future__ import annotations

from typing import Any

from engine.api import INIT_FROM_FIELD, ArtifactError, ConfigError, resolve_init_from, runs
from studio.demo.caller import Caller
from studio.form.values import config_to_values
from studio.i18n.catalog import key, text

# The sections that say which weights the new run trains; it takes them from the source.
CARRIED_SECTIONS = ("model", "quantization", "adapter")
PICK_ONE, CANNOT, FILLED = key("runs.continue.pick"), key("runs.continue.cannot"), key("runs.continue.done")


def continue_values(caller: Caller, run_ids: list[str] | None) -> tuple[dict[str, Any] | None, str]:
    """Form values (path -> widget value) that continue the one picked run, and a message in the caller's
    language; None and the reason when there is not exactly one picked run that can be continued (going, no
    weights, not the visitor's: the engine's reason, in English)."""
    lang = caller.language
    if not run_ids or len(run_ids) != 1:
        return None, text(PICK_ONE, lang)
    try:
        run_dir = caller.run(run_ids[0])
        source = resolve_init_from(run_dir.name, caller.workspace)
    except (runs.RunError, ArtifactError, ConfigError) as exc:
        return None, text(CANNOT, lang, run=run_ids[0], error=exc)
    carried = {
        path: value
        for path, value in config_to_values(source.run.config).items()
        if path.split(".", 1)[0] in CARRIED_SECTIONS
    }
    carried[INIT_FROM_FIELD] = run_dir.name
    return carried, text(FILLED, lang, name=source.run.name, weights=source.weights.label)

"""The Runs tab's "Continue from this run": the Train form's values that start a new run from a finished one.

No Gradio here. The form gets ``model.init_from`` and the source's model, quantization and adapter settings (a LoRA
adapter trains further as it is: engine.runs.lineage refuses other adapter settings); the method, data and
training loop stay as the form has them, since continuing usually changes them (SFT, then DPO on preference pairs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.api import INIT_FROM_FIELD, ArtifactError, ConfigError, resolve_init_from, runs
from studio.demo.policy import NORMAL, DemoPolicy, owned_run
from studio.form.values import config_to_values
from studio.i18n.catalog import SOURCE, key, text

# The sections that say which weights the new run trains; it takes them from the source.
CARRIED_SECTIONS = ("model", "quantization", "adapter")
PICK_ONE, CANNOT, FILLED = key("runs.continue.pick"), key("runs.continue.cannot"), key("runs.continue.done")


def continue_values(
    workspace: Path,
    run_ids: list[str] | None,
    policy: DemoPolicy = NORMAL,
    visitor: str | None = None,
    lang: str = SOURCE,
) -> tuple[dict[str, Any] | None, str]:
    """Form values (path -> widget value) that continue the one picked run, and a message in ``lang``; None and
    the reason when there is not exactly one picked run that can be continued (going, no weights, not the
    visitor's: the engine's reason, in English)."""
    if not run_ids or len(run_ids) != 1:
        return None, text(PICK_ONE, lang)
    try:
        run_dir = owned_run(workspace, run_ids[0], policy, visitor)
        source = resolve_init_from(run_dir.name, workspace)
    except (runs.RunError, ArtifactError, ConfigError) as exc:
        return None, text(CANNOT, lang, run=run_ids[0], error=exc)
    carried = {
        path: value
        for path, value in config_to_values(source.run.config).items()
        if path.split(".", 1)[0] in CARRIED_SECTIONS
    }
    carried[INIT_FROM_FIELD] = run_dir.name
    return carried, text(FILLED, lang, name=source.run.name, weights=source.weights.label)

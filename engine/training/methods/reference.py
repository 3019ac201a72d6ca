"""The reference model TRL's trainers keep beside the trained one (the preference methods that have one, and the
sampling methods with a KL term): for an adapter the base with the adapter off, for a full or freeze fine-tune a
frozen copy of the model, which TRL loads again from its path in its dtype. What the check says of it and what the
memory estimate counts (Method.check_lines, Method.frozen_models) come from here; when a method keeps none is the
method's to say."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config import RunConfig

COPY = "reference: a frozen copy of the model, loaded beside it (counted as frozen below)"
BASE = "reference: the base, with the adapter off"


def frozen_copy(config: RunConfig) -> list[dict[str, Any]]:
    """The config.json of the frozen copy a full or freeze fine-tune's reference is; [] for an adapter's."""
    from transformers import AutoConfig

    from engine.store.paths import resolve_model_source

    if config.adapter.is_lora:
        return []
    model = config.model
    source = resolve_model_source(model.name_or_path)
    return [
        AutoConfig.from_pretrained(source, revision=model.revision, trust_remote_code=model.trust_remote_code).to_dict()
    ]


def kept_reference_line(config: RunConfig) -> str:
    """What the check says of a reference that is kept: the base under the adapter, or a frozen copy."""
    return BASE if config.adapter.is_lora else COPY

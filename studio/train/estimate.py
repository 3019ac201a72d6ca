"""The Train tab's Estimate button: parameters (a weightless copy of the model) and the predicted peak memory; for
data with images also their tokens, which only the model's processor can count (the dataset panel shows rows with
images without it: it would load torch on every check).

Both come from ``engine.training.check.check_run``, the same report ``python -m engine check`` prints; the memory
model itself is ``engine.training.memory`` (one definition, checked by benchmarks/memory_estimate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from studio.i18n.catalog import SOURCE, key, text

NO_MODULES, NO_MODEL, PARAMETERS, MEMORY, DEVICE, UNKNOWN = (
    key(f"train.estimate.{name}") for name in ("no_modules", "no_model", "parameters", "memory", "device", "unknown")
)


@dataclass
class RunEstimate:
    """The Estimate button's result: Markdown to show, and the field errors that stopped it (if any)."""

    markdown: str
    errors: dict[str, str]


def target_module_problems(config: Any, lang: str = SOURCE) -> dict[str, str]:
    """Field errors for LoRA target modules that name no layer of the model, checked on a weightless copy of
    it (``engine.training.check.meta_model``), naming the layers it has; {} when there is nothing to check. A model
    that cannot be read is said in ``lang``.

    Only a list of module names is checked (auto and all-linear are peft's choice), so a Start with the usual
    settings does not pay for importing torch and transformers.
    """
    adapter = config.adapter
    if not adapter.is_lora or isinstance(adapter.target_modules, str):
        return {}
    from engine.api import ConfigError, check_target_modules, meta_model

    try:
        model = meta_model(config)
    except Exception as exc:  # no such model, no network for a hub id, an unknown architecture, ...
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return {"model.name_or_path": text(NO_MODULES, lang, error=first)}
    try:
        check_target_modules(config, model)
    except ConfigError as exc:
        return exc.by_field()
    return {}


def estimate_run(config: Any, lang: str = SOURCE) -> RunEstimate:
    """Trainable / total parameters (``engine.training.check.check_run``, a weightless model) and the memory estimate,
    in ``lang`` (the figures as the engine writes them).

    Imports torch and transformers on first use, so it runs only when asked.
    """
    from engine.api import ConfigError, DataError, check_run

    try:
        report = check_run(config)
    except ConfigError as exc:
        from studio.train.dataset import problems_text

        return RunEstimate(f"✗ {problems_text(exc, lang)}", exc.by_field())
    except DataError as exc:
        from studio.train.dataset import error_markdown

        return RunEstimate(error_markdown(str(exc), lang), {})
    except Exception as exc:  # no such model, no network for a hub id, an unknown architecture, ...
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return RunEstimate(text(NO_MODEL, lang, model=config.model.name_or_path, error=first), {})
    memory = report.memory.summary().replace("predicted peak memory: ", "") if report.memory else text(UNKNOWN, lang)
    lines = [
        text(PARAMETERS, lang, parameters=report.parameters),
        text(MEMORY, lang, memory=memory),
        text(DEVICE, lang, device=report.device, precision=report.precision, steps=f"{report.steps:,}"),
        *image_token_lines(report.data, lang),
    ]
    return RunEstimate("\n\n".join(lines), {})


def image_token_lines(data: Any, lang: str = SOURCE) -> list[str]:
    """For data with images (a DataReport counted through the processor, images included): its tokens and what
    max_length cuts or drops, in ``lang``; [] for text data, whose tokens the dataset panel shows."""
    from engine.api import has_images
    from studio.i18n.problems import translate_warning
    from studio.train.dataset import TOKENS

    if not has_images(data.format) or data.num_tokens is None:
        return []
    tokens = text(TOKENS, lang, tokens=f"{data.num_tokens:,}", loss=f"{data.num_loss_tokens:,}")
    return [tokens, *(f"⚠ {translate_warning(warning, lang)}" for warning in data.warnings)]

"""The Train tab's Estimate button: parameters (a weightless copy of the model) and the predicted peak memory.

Both come from ``engine.training.check.check_run``, the same report ``python -m engine check`` prints; the memory
model itself is ``engine.training.memory`` (one definition, checked by benchmarks/memory_estimate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RunEstimate:
    """The Estimate button's result: Markdown to show, and the field errors that stopped it (if any)."""

    markdown: str
    errors: dict[str, str]


def target_module_problems(config: Any) -> dict[str, str]:
    """Field errors for LoRA target modules that name no layer of the model, checked on a weightless copy of
    it (``engine.training.check.meta_model``), naming the layers it has; {} when there is nothing to check.

    Only a list of module names is checked (auto and all-linear are peft's choice), so a Start with the usual
    settings does not pay for importing torch and transformers.
    """
    adapter = config.adapter
    if not adapter.is_lora or isinstance(adapter.target_modules, str):
        return {}
    from engine.config import ConfigError
    from engine.training.builders import check_target_modules
    from engine.training.check import meta_model

    try:
        model = meta_model(config)
    except Exception as exc:  # no such model, no network for a hub id, an unknown architecture, ...
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return {"model.name_or_path": f"cannot read the model to check its modules: {first}"}
    try:
        check_target_modules(config, model)
    except ConfigError as exc:
        return exc.by_field()
    return {}


def estimate_run(config: Any) -> RunEstimate:
    """Trainable / total parameters (``engine.training.check.check_run``, a weightless model) and the memory estimate.

    Imports torch and transformers on first use, so it runs only when asked.
    """
    from engine.config import ConfigError
    from engine.data import DataError
    from engine.training.check import check_run

    try:
        report = check_run(config)
    except ConfigError as exc:
        return RunEstimate(f"❌ {exc}", exc.by_field())
    except DataError as exc:
        from studio.train.dataset import error_markdown

        return RunEstimate(error_markdown(str(exc)), {})
    except Exception as exc:  # no such model, no network for a hub id, an unknown architecture, ...
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return RunEstimate(f"❌ Cannot read the model `{config.model.name_or_path}`: {first}", {})
    memory = report.memory.summary().replace("predicted peak memory: ", "") if report.memory else "unknown"
    lines = [
        f"**Parameters** {report.parameters}",
        f"**Predicted peak memory per device** {memory}",
        f"**Device** {report.device}, {report.precision} · **optimizer steps** {report.steps:,}",
    ]
    return RunEstimate("\n\n".join(lines), {})

"""Training methods: one package each (``engine/training/methods/<name>/``), registered here.

A method's package holds everything about it: ``__init__.py`` its ``Method`` record (what it trains on, its rules,
charts, scoring and demo caps), ``section.py`` its config section (``dpo:`` for dpo) when it has knobs, and
``trainer.py`` the worker side (its data, its TRL config and trainer). Its form in the studio is generated from the
section; a method that needs more adds one file in ``studio/train/methods/``. From this registry come the values
of RunConfig's ``method``, its method sections and their rules, Evaluate's scoring, the Monitor's charts and the
demo's caps: nothing else in engine/ or studio/ names a method.

This package imports no ML library and, at run time, nothing of engine.config: engine.config composes RunConfig
from the sections registered here. The worker side is imported by ``Method.trainer()`` where a run is checked or
trained.
"""

from __future__ import annotations

from engine.training.methods import distill, dpo, grpo, kto, orpo, rloo, rm, sft
from engine.training.methods.base import SCORINGS, Method, MetricChart, QualityMetric, RunConfig, TrainerParts

__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
    "SCORINGS",
    "Method",
    "MetricChart",
    "TrainerParts",
    "charted_keys",
    "listed_metric",
    "method_charts",
    "method_of",
]

# The registry: one line per method package.
METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        sft.METHOD,
        dpo.METHOD,
        kto.METHOD,
        orpo.METHOD,
        grpo.METHOD,
        rloo.METHOD,
        distill.METHOD,
        rm.METHOD,
    )
}
DEFAULT_METHOD = sft.METHOD.name  # what a config without ``method`` trains with


def method_of(config: RunConfig) -> Method:
    """The method a run trains with."""
    return METHODS[config.method]


def listed_metric(key: str) -> QualityMetric | None:
    """The quality metric ``key`` as a method (any) lists it, with its direction; None for a key none lists."""
    listed = (metric for method in METHODS.values() for metric in method.quality_metrics)
    return next((metric for metric in listed if metric.key == key), None)


def method_charts() -> dict[str, MetricChart]:
    """Every chart a method adds to the Monitor, by its metrics key (the page has a place for each)."""
    found: dict[str, MetricChart] = {}
    for method in METHODS.values():
        for chart in method.charts:
            found.setdefault(chart.key, chart)
    return found


def charted_keys(config: RunConfig) -> list[str]:
    """The metrics keys the run's method charts for this config (its charts whose ``drawn_for`` holds), in its
    record's order: what train.log's progress lines show besides the loss."""
    return [chart.key for chart in method_of(config).charts if chart.drawn_for(config)]


def rows_batched_names() -> str:
    """The methods that train on rows the engine batches, as a message names them ("sft")."""
    return " or ".join(name for name, method in METHODS.items() if method.rows_batched)

"""Training methods: what the recipe, the data check, the Monitor and Evaluate need to know of each one.

A method is one file here that defines a ``Method``, plus its entry in ``METHODS`` below and its name in the
``method`` field of RunConfig (with a config section of its own when it has knobs; the studio's form is built
from the schema). The recipe, the run directory, the studio's tabs and the CLI do not change when one is added.

This module and the method files import no ML library at module level: the studio reads ``Method.charts`` and
the CLI the formats without paying for torch; the worker side (``prepare_data``, ``args_class``,
``build_trainer``) imports what it needs when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, Problem, RunConfig
from engine.data.mixture import FORMAT_JOIN
from engine.data.template_guard import CHECK_BUDGET_S
from engine.training.methods import dpo, grpo, kto, orpo, sft
from engine.training.methods.base import Method, MetricChart, TrainerParts

if TYPE_CHECKING:
    from engine.data import DataReport, DatasetRows

__all__ = [
    "METHODS",
    "Method",
    "MetricChart",
    "TrainerParts",
    "inspect_run_data",
    "method_charts",
    "method_of",
    "require_format",
]


# The registry: one entry per method file.
METHODS: dict[str, Method] = {
    method.name: method for method in (sft.METHOD, dpo.METHOD, kto.METHOD, orpo.METHOD, grpo.METHOD)
}


def method_of(config: RunConfig) -> Method:
    """The method a run trains with."""
    return METHODS[config.method]


def method_charts() -> dict[str, MetricChart]:
    """Every chart a method adds to the Monitor, by its metrics key (the page has a place for each)."""
    found: dict[str, MetricChart] = {}
    for method in METHODS.values():
        for chart in method.charts:
            found.setdefault(chart.key, chart)
    return found


def inspect_run_data(config: RunConfig, tokenizer: Any = None, template_budget_s: float = CHECK_BUDGET_S) -> DataReport:
    """The dataset check of a run: its rows (and tokens, given a tokenizer; engine.data.inspect_dataset), and
    that its method trains on their format: each dataset's, when data.path lists several, checked as soon as it is
    loaded. Raises DataError for the data, ConfigError for data of another method (field ``method``, or the
    dataset's ``data.path.N``)."""
    from engine.data import inspect_dataset

    method, train = method_of(config), config.train

    def accept(dataset: DatasetRows) -> None:
        listed = dataset.label != "data.path"
        require_format(method, dataset.format, dataset.source, dataset.label if listed else "")

    return inspect_dataset(config.data, tokenizer, train.max_length, train.seed, template_budget_s, accept)


def require_format(method: Method, fmt: str, source: str, entry: str = "") -> None:
    """Refuse data whose format the method does not train on, naming what it takes. ``fmt`` may join the formats
    of a list of datasets ("alpaca+conversational": each must fit); ``entry`` names the one dataset of such a
    list that ``source`` is (``data.path.1``): the problem is then that field's."""
    misfit = next((part for part in fmt.split(FORMAT_JOIN) if part not in method.formats), None)
    if misfit is None:
        return
    takers = [other.name for other in METHODS.values() if misfit in other.formats]
    advice = f"set method to {' or '.join(takers)}" if takers else "pick another dataset"
    if entry:
        advice = f"remove it from data.path, or {advice}" if takers else "remove it from data.path"
    message = (
        f"{source} is {FORMAT_WORDS.get(misfit, misfit + ' data')}, and {method.name} trains on "
        f"{', '.join(method.formats)} data; {advice}"
    )
    raise ConfigError([Problem(entry or "method", message)])


# How a format reads in a message.
FORMAT_WORDS = {
    "preference": "preference data (a chosen and a rejected answer per prompt)",
    "kto": "kto data (answers labelled desirable or not)",
    "prompt": "prompts only (no answers to learn from; grpo samples its own)",
}

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
from engine.data.template_guard import CHECK_BUDGET_S
from engine.training.methods import dpo, kto, orpo, sft
from engine.training.methods.base import Method, MetricChart, TrainerParts

if TYPE_CHECKING:
    from engine.data import DataReport

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
METHODS: dict[str, Method] = {method.name: method for method in (sft.METHOD, dpo.METHOD, kto.METHOD, orpo.METHOD)}


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
    that its method trains on their format. Raises DataError for the data, ConfigError (field ``method``) for
    data of another method."""
    from engine.data import inspect_dataset

    train = config.train
    report = inspect_dataset(config.data, tokenizer, train.max_length, train.seed, template_budget_s)
    require_format(method_of(config), report.format, report.source)
    return report


def require_format(method: Method, fmt: str, source: str) -> None:
    """Refuse data whose format the method does not train on, naming what it takes."""
    if fmt in method.formats:
        return
    takers = [other.name for other in METHODS.values() if fmt in other.formats]
    advice = f"set method to {' or '.join(takers)}" if takers else "pick another dataset"
    raise ConfigError(
        [
            Problem(
                "method",
                f"{source} is {FORMAT_WORDS.get(fmt, fmt + ' data')}, and {method.name} trains on "
                f"{', '.join(method.formats)} data; {advice}",
            )
        ]
    )


# How a format reads in a message.
FORMAT_WORDS = {
    "preference": "preference data (a chosen and a rejected answer per prompt)",
    "kto": "kto data (answers labelled desirable or not)",
}

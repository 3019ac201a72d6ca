"""Training methods: what the recipe, the data check, the Monitor and Evaluate need to know of each one.

A method is one file here that defines a ``Method``, plus its entry in ``METHODS`` below and its name in the
``method`` field of RunConfig (with a config section of its own when it has knobs; the studio's form is built
from the schema). The recipe, the run directory, the studio's tabs and the CLI do not change when one is added.

This module and the method files import no ML library at module level: the studio reads ``Method.charts`` and
the CLI the formats without paying for torch; the worker side (``prepare_data``, ``args_class``,
``build_trainer``) imports what it needs when called.
"""

from __future__ import annotations

from engine.config import ConfigError, Problem, RunConfig
from engine.training.methods import sft
from engine.training.methods.base import Method, MetricChart, TrainerParts

__all__ = ["METHODS", "Method", "MetricChart", "TrainerParts", "method_charts", "method_of", "require_format"]


# The registry: one entry per method file.
METHODS: dict[str, Method] = {method.name: method for method in (sft.METHOD,)}


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


def require_format(method: Method, fmt: str, source: str) -> None:
    """Refuse data whose format the method does not train on, naming what it takes."""
    if fmt not in method.formats:
        raise ConfigError(
            [
                Problem(
                    "method",
                    f"{source} is {fmt} data, and {method.name} trains on {', '.join(method.formats)}; "
                    "pick another method or dataset",
                )
            ]
        )

"""Which metrics a sweep's objective can be for a base run, and which way each is better.

Each method lists the metrics that tell how well its run did (``Method.quality_metrics``: the losses for most, the
rewards for the sampling methods); exact_match (Evaluate's greedy exact match, scored once a trial's run has
completed: engine.sweeps.evaluated) is one more where Evaluate scores generated answers. Any other key a run logs
can be an objective as well, in the direction the sweep gives.
"""

from __future__ import annotations

from engine.config import RunConfig
from engine.evaluate.evaluations import SCORING_ANSWERS, SCORING_REWARDS
from engine.sweeps.sections import EXACT_MATCH
from engine.training.methods import listed_metric, method_of
from engine.training.methods.base import QualityMetric

# Evaluate's scorings that hold an exact match of generated answers (engine.evaluate.evaluations)
EXACT_MATCH_SCORINGS = (SCORING_ANSWERS, SCORING_REWARDS)
EXACT_MATCH_METRIC = QualityMetric(EXACT_MATCH, "maximize")


def objective_metrics(base: RunConfig) -> tuple[QualityMetric, ...]:
    """The metrics offered as the objective of a sweep of ``base``: its method's, then exact_match where it applies."""
    method = method_of(base)
    exact = (EXACT_MATCH_METRIC,) if method.scoring in EXACT_MATCH_SCORINGS else ()
    return (*method.quality_metrics, *exact)


def default_objective(base: RunConfig) -> QualityMetric:
    """A new sweep's objective: the first of the method's metrics that a run of ``base`` logs (a held-out one only
    where it evaluates)."""
    metrics = method_of(base).quality_metrics
    return next((metric for metric in metrics if evaluates(base) or not metric.needs_eval), metrics[-1])


def known_metric(key: str) -> QualityMetric | None:
    """The metric ``key`` as a method (any) or exact_match lists it, with its direction; None for another key."""
    return EXACT_MATCH_METRIC if key == EXACT_MATCH else listed_metric(key)


def evaluates(base: RunConfig) -> bool:
    """Whether a run of ``base`` logs eval metrics (its config holds eval data whenever it evaluates)."""
    return base.train.eval_strategy != "no"

"""Warnings about how long a run is that the Train tab shows before Start: a warm-up as long as the run or longer
leaves the learning rate below its peak for the whole run. Known from the form for a run of max_steps; for a run of
epochs, once the dataset check has counted the rows. No Gradio here.

(max_steps 0, which transformers ran as one step and called complete, is refused by the config itself:
engine.config.sections.TrainSection.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from engine.api import RunConfig
from studio.i18n.catalog import SOURCE, key, text
from studio.train.method_fit import loose_config

WARMUP_TOO_LONG = key("train.warn.warmup")


def planned_steps(config: RunConfig, train_rows: int | None) -> int | None:
    """The optimizer steps the run takes: max_steps, or its epochs over ``train_rows`` (None when those are not
    known), as engine.training.check.planned_steps counts them."""
    train = config.train
    if train.max_steps > 0:
        return train.max_steps
    if train_rows is None:
        return None
    per_step = train.per_device_batch_size * train.gradient_accumulation_steps * config.launch.num_processes
    return math.ceil(train.num_epochs * math.ceil(train_rows / per_step))


def warmup_warning(config: RunConfig, train_rows: int | None = None, lang: str = SOURCE) -> str | None:
    """Why the warm-up does not fit the run (a number of warm-up steps as large as the run's steps), in ``lang``;
    None when it fits, is a fraction of the run, or the run's length is not known yet."""
    warmup = config.train.warmup
    steps = planned_steps(config, train_rows)
    if warmup < 1 or steps is None or warmup < steps:
        return None
    return text(WARMUP_TOO_LONG, lang, warmup=f"{warmup:,.0f}", steps=f"{steps:,}")


def epochs_warmup_warning(values: Mapping[str, Any], train_rows: int, lang: str = SOURCE) -> str | None:
    """``warmup_warning`` for a form whose run trains epochs, once the dataset check has counted ``train_rows``; None
    for a run of max_steps (the preview says it already) and for a form that cannot be read yet (its errors say
    why)."""
    config = loose_config(values)
    if config is None or config.train.max_steps > 0:
        return None
    return warmup_warning(config, train_rows, lang)

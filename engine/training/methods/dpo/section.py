"""DPO's config section (``dpo:``): the knobs of TRL 1.16's DPOConfig that the studio offers.

Read only by method dpo; the others keep their defaults and the studio shows only the chosen method's section.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.config.schema import Section, advanced

# DPOConfig.loss_type in TRL 1.16 (trl/trainer/dpo_config.py); one at a time here.
DpoLoss = Literal[
    "sigmoid",
    "hinge",
    "ipo",
    "exo_pair",
    "nca_pair",
    "robust",
    "bco_pair",
    "sppo_hard",
    "aot",
    "aot_unpaired",
    "apo_zero",
    "apo_down",
    "discopop",
    "sigmoid_norm",
]
# The losses that smooth labels (conservative DPO, robust DPO); elsewhere label_smoothing has no effect.
SMOOTHED_DPO_LOSSES = ("sigmoid", "robust", "sigmoid_norm")
Truncation = Literal["keep_start", "keep_end"]


class DpoSection(Section):
    """Direct preference optimisation (method dpo): TRL's DPOTrainer on chosen / rejected pairs."""

    loss_type: DpoLoss = Field(
        "sigmoid",
        description="The DPO loss: sigmoid (the paper's), ipo, hinge, robust (noisy labels), and the other "
        "variants TRL offers.",
    )
    beta: float = Field(
        0.1,
        gt=0,
        le=100,
        description="How far the model may move from the reference: higher keeps it closer (IPO: the regulariser).",
    )
    label_smoothing: float = Field(
        0.0,
        ge=0,
        lt=0.5,
        description="Share of pairs assumed flipped (conservative / robust DPO); sigmoid, robust, sigmoid_norm only.",
    )
    sft_loss_weight: float = Field(
        0.0,
        ge=0,
        le=100,
        description="Add the supervised loss on the chosen answers with this weight (RPO; 0: off). It keeps the "
        "chosen answers likely, so greedy answers take the preferred form and do not drift.",
    )
    truncation_mode: Truncation = Field(
        "keep_start",
        description="Which end of a pair longer than train.max_length to keep: keep_end cuts the prompt's start "
        "and keeps the answers.",
        json_schema_extra=advanced(),
    )
    precompute_ref_log_probs: bool = Field(
        False,
        description="Score the data with the reference model once before training, so a full fine-tune keeps no "
        "second model in memory (LoRA needs none: its reference is the base with the adapter off).",
        json_schema_extra=advanced(),
    )

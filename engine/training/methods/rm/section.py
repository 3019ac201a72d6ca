"""Reward modeling's config section (``rm:``): the knob of TRL 1.16's RewardConfig that the studio offers."""

from __future__ import annotations

from pydantic import Field

from engine.config.schema import Section


class RmSection(Section):
    """Reward modeling (method rm): TRL's RewardTrainer on chosen / rejected pairs."""

    center_rewards_coefficient: float = Field(
        0.0,
        ge=0,
        le=10,
        description="Pull the scores towards a mean of zero with this weight (0: off; 0.01 is the paper's), so "
        "scores from different runs read on one scale.",
    )

"""ORPO's config section (``orpo:``): the knob of TRL 1.16's ORPOConfig that the studio offers."""

from __future__ import annotations

from pydantic import Field

from engine.config.schema import Section


class OrpoSection(Section):
    """Odds-ratio preference optimisation (method orpo): supervised loss plus a preference term; no reference."""

    beta: float = Field(
        0.1, gt=0, le=100, description="Weight of the odds-ratio preference term (lambda in the paper)."
    )

"""What every part of a config builds on: the Section base, and validation problems that name their field."""

from engine.config.schema.errors import ConfigError, Problem, problems_from_validation
from engine.config.schema.section import (
    MAX_COUNT,
    MODEL_SOURCE,
    RUN_SOURCE,
    Section,
    advanced,
    blank_is_none,
    names_model,
    names_run,
)

__all__ = [
    "MAX_COUNT",
    "MODEL_SOURCE",
    "RUN_SOURCE",
    "ConfigError",
    "Problem",
    "Section",
    "advanced",
    "blank_is_none",
    "names_model",
    "names_run",
    "problems_from_validation",
]

"""What every part of a config builds on: the Section base, and validation problems that name their field."""

from engine.config.schema.errors import ConfigError, Problem, problems_from_validation
from engine.config.schema.section import MAX_COUNT, Section, advanced

__all__ = ["MAX_COUNT", "ConfigError", "Problem", "Section", "advanced", "problems_from_validation"]

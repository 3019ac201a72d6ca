"""The base of every config section: a pydantic model that refuses unknown keys, infinite numbers and secrets.

It lives below engine.config because the sections of a training method live in the method's own package
(engine.methods), and engine.config composes RunConfig from them: both build on this module.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from engine.schema.secrets import refuse_secrets

# Upper bound of counts (steps, rows): what the C integers of torch and the Trainer hold.
MAX_COUNT = 2**31 - 1


def advanced(**extra: Any) -> dict[str, Any]:
    """Schema extra that marks a field as advanced (collapsed in the studio form)."""
    return {"advanced": True, **extra}


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated, numbers are finite,
    and no text holds an access token (the config is saved and shown)."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=False, allow_inf_nan=False
    )

    @field_validator("*", mode="after")
    @classmethod
    def _no_secrets(cls, value: Any) -> Any:
        return refuse_secrets(value)

    def to_yaml_data(self) -> dict[str, Any]:
        """The section as its YAML file shows it (a section may leave out what reads back the same)."""
        return self.model_dump(mode="json")

"""The RunConfig a form's values stand for, as every handler that acts on it takes it: validated
(studio.form.values) and with every path it names confined to the folders a browser may name (studio.path_guard)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from engine.api import RunConfig
from studio.form.values import values_to_config
from studio.path_guard import guard_config


def form_config(values: Mapping[str, Any], workspace: Path | None) -> RunConfig:
    """The form's config (values_to_config) with its paths confined; raises ConfigError naming each bad field."""
    return guard_config(cast(RunConfig, values_to_config(values)), workspace)

"""One typed RunConfig: the single source of truth for the studio's widgets, the YAML file and the CLI.

Two parts: ``schema/`` (the Section base and validation problems, what every config part builds on) and ``run.py``
(RunConfig, composed from the shared sections here and each training method's own section). The methods' sections
build on ``engine.config.schema``, and importing it runs this file first: so this file imports nothing that needs
the methods, and hands on run.py's names when they are first asked for (PEP 562), which keeps
``from engine.config import RunConfig`` the one way to reach them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engine.config.schema import ConfigError, Problem

if TYPE_CHECKING:
    from engine.config.run import *  # noqa: F403


def __getattr__(name: str) -> Any:
    """run.py's public names (RunConfig, parse_config, load_config, ...), imported on first use."""
    if not name.startswith("_"):
        run = importlib.import_module("engine.config.run")
        if name in run.__all__:
            return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConfigError", "Problem"]

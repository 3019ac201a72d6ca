"""Which optional packages this machine has (flash-attn, liger-kernel, the trackers), asked without importing them."""

from __future__ import annotations

import importlib.util


def installed(module: str) -> bool:
    """Whether a Python package can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None

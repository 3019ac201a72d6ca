"""What custom autograd functions keep for backward outside autograd's saved tensors: the tensors their contexts
hold as attributes (bitsandbytes' int8 matmul keeps its input so), which saved-tensor hooks never see."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def context_tensors(loss: Any) -> Iterator[Any]:
    """Every floating-point tensor held as an attribute by a context in the graph behind ``loss`` (floating point
    only: a reentrant checkpoint keeps the RNG state, bytes, to recompute dropout)."""
    import torch

    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for value in getattr(node, "__dict__", {}).values():  # only custom functions' contexts have attributes
            for tensor in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                    yield tensor
        stack.extend(parent for parent, _ in node.next_functions)

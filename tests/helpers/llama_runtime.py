"""llama.cpp (the llama-cpp-python bindings) loading an exported GGUF the way the GGUF tests compare it.

The bindings build llama.cpp for the machine's own CPU. On cores with AMX (Intel Sapphire Rapids and later)
llama.cpp then keeps q8_0 weights in its "extra" CPU buffer types (AMX tiles, repacked blocks), whose matmul
crashed the process (SIGSEGV in ``llama_decode``) on the demo model's q8_0 file, whose 1,295-row embedding is no
multiple of their tiles; an f16 file ran. ``use_extra_bufts = False`` (llama.cpp's ``--no-repack``) keeps every
weight in the plain CPU buffer, the path every machine has, so the tests compare the file and not one CPU's
kernels. The bindings' ``Llama`` does not take the option, so its default model parameters are wrapped while it
loads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import llama_cpp
import llama_cpp.llama_cpp as native


def load_llama(model_path: str, lora_path: str | None = None, **kwargs: Any) -> llama_cpp.Llama:
    """``llama_cpp.Llama(model_path, lora_path, **kwargs)`` with llama.cpp's extra CPU buffer types off."""
    with _plain_cpu_buffers():
        return llama_cpp.Llama(model_path=model_path, lora_path=lora_path, **kwargs)


@contextmanager
def _plain_cpu_buffers() -> Iterator[None]:
    defaults = native.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = defaults()
        params.use_extra_bufts = False
        return params

    native.llama_model_default_params = without_extra_buffers
    try:
        yield
    finally:
        native.llama_model_default_params = defaults

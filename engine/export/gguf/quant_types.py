"""The GGUF tensor types an export offers, by the names llama.cpp's tools use (standard library only).

Each name maps to a ggml tensor type and the file type recorded in ``general.file_type``. Offered are the types
the ``gguf`` package can write in numpy: 16-bit floats and the block quantizations Q8_0, Q5_1, Q5_0, Q4_1 and
Q4_0. Not offered: the K-quants (Q4_K_M, Q6_K, ...) and i-quants, which ``gguf.quants`` can only read (their
writers live in llama.cpp's C code, ``llama-quantize``, with its importance-matrix logic); TQ1_0 / TQ2_0, which
are for ternary-trained models only. A tensor whose rows do not split into the type's blocks (32 values) is
written as F16, as llama.cpp's converter does; 1-D tensors and norms stay F32.
"""

from __future__ import annotations

# name -> (gguf.GGMLQuantizationType member, gguf.LlamaFileType member)
GGUF_TYPES: dict[str, tuple[str, str]] = {
    "f16": ("F16", "MOSTLY_F16"),
    "bf16": ("BF16", "MOSTLY_BF16"),
    "q8_0": ("Q8_0", "MOSTLY_Q8_0"),
    "q5_1": ("Q5_1", "MOSTLY_Q5_1"),
    "q5_0": ("Q5_0", "MOSTLY_Q5_0"),
    "q4_1": ("Q4_1", "MOSTLY_Q4_1"),
    "q4_0": ("Q4_0", "MOSTLY_Q4_0"),
}
DEFAULT_GGUF_TYPE = "q8_0"

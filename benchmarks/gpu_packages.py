"""The GPU check's set-up steps (benchmarks/gpu_check.sh), one per flag:

    python benchmarks/gpu_packages.py                        # python and the versions of the packages that matter
    python benchmarks/gpu_packages.py --check-bitsandbytes   # exit 1 when bitsandbytes does not import
    python benchmarks/gpu_packages.py --warm-liger           # compile Liger's kernels for the benchmark shapes

Liger's Triton kernels compile on first use and are cached on disk: ``--warm-liger`` runs them forward and backward
on one layer of each benchmark model's shape (the 87M and the ~1B of throughput_real.py; one row and a batch,
lengths on and off a multiple of 16), so no arm's measured steps pay for a compile. It exits 1 when they fail, and
the check then removes liger-kernel so the engine runs without it.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

NAMES = (
    ("torch", "triton", "transformers", "peft", "trl", "accelerate", "datasets", "pyarrow", "fsspec")
    + ("huggingface_hub", "tokenizers", "pydantic", "typing_extensions", "liger_kernel", "bitsandbytes")
    + ("flash_attn", "optuna", "sqlalchemy", "pytest", "pytest-xdist")
)


def versions() -> str:
    """One line: python and each package's version (- when missing)."""
    found = []
    for name in NAMES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} -")
    return f"python {sys.version.split()[0]}; " + ", ".join(found)


def check_bitsandbytes() -> int:
    try:
        import bitsandbytes
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure means: run without it
        print(f"bitsandbytes does not import ({type(exc).__name__}: {exc}): removed, QLoRA rows and tests will fail")
        return 1
    print("bitsandbytes", bitsandbytes.__version__, "CUDA", torch.version.cuda)
    return 0


def warm_liger(batch: int = 16) -> int:
    """Liger's kernels forward and backward on one layer of each benchmark shape, bf16, with LoRA (what TRL's
    SFTTrainer applies: no fused loss)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from throughput_real import MODELS
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.integrations.liger import apply_liger_kernel

    try:
        for shape in MODELS.values():
            vocab = shape.vocab or 1295
            config = LlamaConfig(
                vocab_size=vocab, hidden_size=shape.hidden, num_hidden_layers=1, num_attention_heads=shape.heads,
                num_key_value_heads=shape.kv_heads, intermediate_size=shape.mlp, max_position_embeddings=2048,
            )  # fmt: skip
            model = LlamaForCausalLM(config).to("cuda", torch.bfloat16)
            lora = LoraConfig(task_type="CAUSAL_LM", r=8, lora_alpha=16, target_modules="all-linear")
            model = get_peft_model(model, lora)
            apply_liger_kernel(model, {"fused_linear_cross_entropy": False})
            for rows in (1, batch):
                for length in (33, 32, 1000):
                    ids = torch.randint(0, vocab, (rows, length), device="cuda")
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                    loss.backward()
            torch.cuda.synchronize()
            print(f"liger kernels ran at hidden {shape.hidden} (forward and backward), last loss {loss.item():.3f}")
    except Exception as exc:  # noqa: BLE001 - any failure means: run without Liger
        print(f"Liger's kernels failed ({type(exc).__name__}: {exc}): liger-kernel removed, the engine runs without")
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-bitsandbytes", action="store_true")
    parser.add_argument("--warm-liger", action="store_true")
    args = parser.parse_args()
    if args.check_bitsandbytes:
        return check_bitsandbytes()
    if args.warm_liger:
        return warm_liger()
    print(versions())
    return 0


if __name__ == "__main__":
    sys.exit(main())

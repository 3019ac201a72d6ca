"""The memory estimate of a vision-language run against measured peaks, as benchmarks/memory_estimate.py does for
text: a LLaVA built from that benchmark's ~100M LLaMA (hidden 768, 12 layers, 32,000-entry vocabulary) and a
CLIP ViT-B/16 vision tower at 224 x 224 pixels (86M parameters, 197 image tokens per image), random weights, the
demo VLM's processor at that size. Every row is one image, a question and a long answer of c4_demo.jsonl text, so
each sequence is cut to max_length and holds the image's 197 tokens.

Each config trains a few steps through the product (``python -m engine train``); measured is the worker's peak
resident set above the process baseline, predicted the estimate's parts above its baseline (the check's own
estimate, image side included).

    python benchmarks/memory_vlm.py                     # three configs, a few minutes on 2 cores
    python benchmarks/memory_vlm.py --only lora-320

Goal: predicted / measured within 0.8-1.2, as for text runs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_estimate import C4, CACHE, GB, GOAL, build_model, measure_baseline, measure_run  # noqa: E402

from engine.config import RunConfig  # noqa: E402
from engine.training.check import check_run  # noqa: E402

VLM_DIR = CACHE.parent / "memory-vlm" / "model"
DATA = CACHE.parent / "memory-vlm" / "rows.jsonl"
IMAGE_SIZE = 224
# name: (adapter, quantization mode, max_length, batch size, steps)
CONFIGS: dict[str, tuple[dict[str, Any], str, int, int, int]] = {
    "lora-320": ({"method": "lora"}, "none", 320, 4, 4),
    "full-320": ({"method": "full"}, "none", 320, 2, 4),
    "qlora-4bit-320": ({"method": "lora"}, "4bit", 320, 4, 4),
}


def build_vlm() -> None:
    """The LLaVA of the docstring, saved once beside the text benchmark's model."""
    if (VLM_DIR / "model.safetensors").is_file():
        return
    import torch
    from transformers import (
        AutoConfig,
        AutoProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
    )

    build_model()  # the text benchmark's LLaMA: its shape is the language model's
    processor = AutoProcessor.from_pretrained(ROOT / "assets" / "demo-vlm")
    processor.image_processor.size = {"shortest_edge": IMAGE_SIZE}
    processor.image_processor.crop_size = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    text_config = AutoConfig.from_pretrained(CACHE / "model")
    vision = CLIPVisionConfig(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
        image_size=IMAGE_SIZE, patch_size=16, projection_dim=768,
    )  # fmt: skip
    image_token = processor.tokenizer.convert_tokens_to_ids(processor.image_token)
    config = LlavaConfig(
        vision_config=vision, text_config=text_config, image_token_index=image_token,
        image_seq_length=(IMAGE_SIZE // 16) ** 2 + 1, vision_feature_select_strategy="full",
        vision_feature_layer=-2, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(VLM_DIR)
    processor.save_pretrained(VLM_DIR)


def build_data() -> None:
    """48 rows: a random picture, a question, and some 8,000 characters of c4 text as the answer."""
    if DATA.is_file():
        return
    from PIL import Image

    rng = random.Random(0)
    texts = [json.loads(line)["text"] for line in C4.read_text(encoding="utf-8").splitlines()]
    rows = []
    for number in range(48):
        image = Image.new("RGB", (256, 256), tuple(rng.randrange(256) for _ in range(3)))
        name = f"image_{number:02d}.png"
        image.save(DATA.parent / name)
        answer = " ".join(rng.sample(texts, 8))[:8000]
        question = {"role": "user", "content": "<image>Describe the picture."}
        messages = [question, {"role": "assistant", "content": answer}]
        rows.append({"messages": messages, "images": [name]})
    DATA.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def run_config(name: str) -> RunConfig:
    adapter, quantization, length, batch, steps = CONFIGS[name]
    return RunConfig.model_validate(
        {
            "name": f"memory-vlm-{name}",
            "model": {"name_or_path": str(VLM_DIR)},
            "adapter": adapter,
            "quantization": {"mode": quantization},
            "data": {"path": str(DATA), "eval_size": 0},
            "train": {
                "max_steps": steps,
                "per_device_batch_size": batch,
                "max_length": length,
                "save_strategy": "no",
                "logging_steps": 1,
            },
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(CONFIGS), help="run these configs only")
    args = parser.parse_args()
    DATA.parent.mkdir(parents=True, exist_ok=True)
    build_vlm()
    build_data()
    baseline = measure_baseline()
    print(f"process baseline (interpreter + worker imports, VmRSS): {baseline / GB:.2f} GB")
    print(f"{'config':16} {'predicted':>9} {'measured':>9} {'ratio':>6}  within {GOAL[0]}-{GOAL[1]}")
    misses = []
    for name in args.only or CONFIGS:
        config = run_config(name)
        estimate = check_run(config).memory
        assert estimate is not None
        with tempfile.TemporaryDirectory(prefix=f"memory-vlm-{name}-") as tmp:
            started = time.time()
            peak, _ = measure_run(config, Path(tmp))
        measured = peak - baseline
        ratio = estimate.training / measured
        ok = GOAL[0] <= ratio <= GOAL[1]
        misses += [] if ok else [name]
        print(
            f"{name:16} {estimate.training / GB:>7.2f}GB {measured / GB:>7.2f}GB {ratio:>6.2f}  {'yes' if ok else 'NO'}"
            f"   ({time.time() - started:.0f} s)",
            flush=True,
        )
        parts = ", ".join(f"{key} {value / GB:.2f}" for key, value in estimate.parts().items() if key != "baseline")
        print(f"{'':16} predicted parts: {parts}", flush=True)
    print(f"all within {GOAL[0]}-{GOAL[1]}: {'yes' if not misses else 'no: ' + ', '.join(misses)}")
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())

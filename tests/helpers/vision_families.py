"""What the tests of vision-language families share (tests/engine/training/test_vision_families*.py): the families,
the colour rows, a run's config of a family, and which parts of a model train."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.config import RunConfig, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.training.hardware import Hardware
from engine.training.vision import PROJECTOR, VisionParts
from tests.helpers.tiny_vlms import FAMILIES

CPU = Hardware(gpu_count=0, bf16_supported=False)
DEMO_VLM = PROJECT_ROOT / "assets" / "demo-vlm"
NAMES = list(FAMILIES)
COLOURS = {"red": (220, 30, 30), "green": (30, 200, 60), "blue": (30, 60, 220), "yellow": (230, 220, 40)}
QUESTION = "What colour is it?"
# A first exchange long enough that the image of the turn after it starts past every short row's end.
LONG_ANSWER = "Red, orange, yellow, green, blue, indigo and violet: the colours of the rainbow, in order."


def colour_row(before: list[tuple[str, str]], colour: str) -> dict[str, Any]:
    """A vision row (the engine's LLaMA-Factory shape): text-only exchanges ``before``, then the image's question."""
    messages = [
        message
        for question, answer in before
        for message in ({"role": "user", "content": question}, {"role": "assistant", "content": answer})
    ]
    messages += [
        {"role": "user", "content": f"<image>{QUESTION}"},
        {"role": "assistant", "content": colour},
    ]
    return {"messages": messages, "images": [f"{colour}.png"]}


def family_config(path: Path, data: Path | None = None, **sections: dict[str, Any]) -> RunConfig:
    """A run of the model at ``path`` (LoRA r 4 on peft's default targets, the vision section's defaults) on
    ``data``; sections given are merged in."""
    values: dict[str, Any] = {
        "name": "family",
        "model": {"name_or_path": str(path)},
        "adapter": {"r": 4, "dropout": 0.0},
        "train": {
            "max_steps": 2,
            "per_device_batch_size": 2,
            "learning_rate": 1e-3,
            "max_length": 128,
            "logging_steps": 1,
            "save_strategy": "no",
        },
        "launch": {"threads_per_process": 1},  # no CPU-share callback changing this process's threads
    }
    if data is not None:
        values["data"] = {"path": str(data)}
    for section, more in sections.items():
        values.setdefault(section, {}).update(more)
    return parse_config(values)


def part_names(parts: VisionParts) -> Callable[[str], str]:
    """The part of a parameter or module name of the model or of the peft model around it (its names prefixed)."""
    return lambda name: parts.part_of(name.removeprefix("base_model.model."))


def assert_lora_trains(model: Any, parts: VisionParts, trained: set[str]) -> None:
    """The peft ``model`` trains parameters in the ``trained`` parts only; in the projector exactly peft's full copy
    (modules_to_save), its original frozen beside it."""
    own = part_names(parts)
    names = {name: param.requires_grad for name, param in model.named_parameters()}
    assert {own(name) for name, grad in names.items() if grad} == trained
    projector = [name for name in names if own(name) == PROJECTOR]
    copies = {name for name in projector if ".modules_to_save." in name}
    assert copies and {name for name in projector if names[name]} == copies

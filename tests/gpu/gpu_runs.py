"""What the GPU tests share: a few-step run of the demo model on the device under test, trained through the engine's
CLI (``python -m engine train``, tests.helpers.engine_cli), and what every run must show: the device in the path
line of its train.log, finite losses (falling where a few steps can show it), and a result that loads."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import yaml

from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics, read_status
from tests.helpers.engine_cli import run_train

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
DATASETS = PROJECT_ROOT / "assets" / "datasets"
DEMO_PRESET = PROJECT_ROOT / "assets" / "presets" / "demo.yaml"
STEPS = 12
WINDOW = 3  # steps averaged at each end when a loss must fall
PROMPT = "Which month and day is 2024-03-15?"


def run_config(device: str, method: str = "sft", **sections: dict[str, Any]) -> dict[str, Any]:
    """The demo preset (LoRA r 16 on the date task) cut to STEPS steps, each one logged, no checkpoint and no
    evaluation, on ``device``; ``sections`` update the preset's sections key by key."""
    config = yaml.safe_load(DEMO_PRESET.read_text(encoding="utf-8"))
    config["method"] = method
    config["train"].update(max_steps=STEPS, logging_steps=1, save_strategy="no", eval_strategy="no")
    config["launch"] = {"device": device}
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    return config


def train(config: dict[str, Any], run_dir: Path) -> Path:
    """Train ``config`` in the foreground into ``run_dir`` (its YAML beside it); fails with the run's output."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    path = run_dir.parent / f"{run_dir.name}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = run_train(path, run_dir, timeout=900)
    status = read_status(run_dir)
    # The run's own error first: the check's summary quotes a failure's first line.
    assert done.returncode == 0, f"{status.error}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert status.state == "completed", status
    return run_dir


def losses(run_dir: Path) -> list[float]:
    """The loss of every logged training step."""
    return [event["loss"] for event in iter_metrics(run_dir) if event.get("event") == "train" and "loss" in event]


def check_trained(run_dir: Path, device: str, falls: bool = True) -> list[float]:
    """The run trained on ``device`` (its path line says so; on a GPU it logged GPU memory) with finite losses,
    which fall over the run when ``falls``: the mean of the last WINDOW steps below that of the first."""
    path = next(line for line in (run_dir / "train.log").read_text().splitlines() if line.startswith("path: "))
    assert path.startswith(f"path: {device}, "), path
    if device == "cuda":
        memory = [event.get("memory_mb", 0) for event in iter_metrics(run_dir) if event.get("event") == "train"]
        assert max(memory) > 0, "no GPU memory logged"
    values = losses(run_dir)
    assert len(values) >= 2 * WINDOW and all(map(math.isfinite, values)), values
    if falls:
        assert statistics.mean(values[-WINDOW:]) < statistics.mean(values[:WINDOW]), values
    return values


def result_logits(run_dir: Path, device: str) -> Any:
    """The run's result loaded as a user loads it (peft on the demo base for an adapter, transformers for a whole
    model) on ``device``: its logits for PROMPT, checked finite."""
    from transformers import AutoModelForCausalLM

    adapter = run_dir / "adapter"
    if not adapter.is_dir():
        return folder_logits(run_dir / "model", device)
    from peft import PeftModel

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(DEMO_MODEL), str(adapter))
    return _logits(model, adapter, device)


def folder_logits(folder: Path, device: str) -> Any:
    """A whole model's logits for PROMPT (a full fine-tune's result, a merged export), loaded with plain
    transformers on ``device``; checked finite."""
    from transformers import AutoModelForCausalLM

    return _logits(AutoModelForCausalLM.from_pretrained(folder), folder, device)


def _logits(model: Any, tokenizer_folder: Path, device: str) -> Any:
    import torch
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(tokenizer_folder)(PROMPT, return_tensors="pt").input_ids.to(device)
    with torch.inference_mode():
        logits = model.to(device).eval()(input_ids=ids).logits.float()
    assert torch.isfinite(logits).all()
    return logits

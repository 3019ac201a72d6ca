"""DPO, KTO and ORPO train for real: TRL's trainers on the demo model, through ``python -m engine train`` and
through engine.runs (stop, resume), on the real LLaMA-Factory files and the bundled preference set."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import RunConfig, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from engine.training.methods import METHODS
from tests.helpers.engine_cli import run_train
from tests.helpers.run_progress import stop_then_resume

pytestmark = pytest.mark.integration

SHARED = PROJECT_ROOT.parent / "shared" / "datasets"
DEMO_PREFERENCE = "assets/datasets/demo_preference.jsonl"


def train_cli(config: RunConfig, root: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``python -m engine train CONFIG`` in the foreground, offline, as a user types it."""
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / "config.yaml"
    config_path.write_text(config.to_yaml())
    return root / "run", run_train(config_path, root / "run")


def log_of(run_dir: Path) -> str:
    return (run_dir / "train.log").read_text()


def train_events(run_dir: Path) -> list[dict]:
    """The train events of metrics.jsonl; fails if a step was written twice."""
    events = [event for event in iter_metrics(run_dir) if event["event"] == "train"]
    steps = [event["step"] for event in events]
    assert len(steps) == len(set(steps)), f"duplicated steps: {steps}"
    return events


def real_file_config(method: str, path: Path, **sections: dict) -> RunConfig:
    """A few quick steps on a real file (long rows for this byte-level tokenizer: max_length 512)."""
    data = {
        "name": f"{method}-real",
        "method": method,
        "data": {"path": str(path), "max_samples": 16},
        "train": {"max_steps": 3, "per_device_batch_size": 2, "max_length": 512, "logging_steps": 1},
    }
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return parse_config(data)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared datasets not present")
@pytest.mark.parametrize(
    ("method", "file", "extra"),
    [
        ("dpo", "dpo_en_demo.json", {}),
        ("orpo", "dpo_en_demo.json", {}),
        ("kto", "kto_en_demo.json", {}),
        # A full fine-tune scores the data with the reference once, then keeps no second model.
        ("dpo", "dpo_en_demo.json", {"adapter": {"method": "full"}, "dpo": {"precompute_ref_log_probs": True}}),
    ],
    ids=["dpo", "orpo", "kto", "dpo-full-precomputed"],
)
def test_a_real_file_trains_with_the_methods_metrics(method: str, file: str, extra: dict, tmp_path: Path):
    run_dir, result = train_cli(real_file_config(method, SHARED / file, **extra), tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    status = runs.status(run_dir)
    assert (status.state, status.step) == ("completed", 3)
    events = train_events(run_dir)
    assert [event["step"] for event in events] == [1, 2, 3]
    assert all(math.isfinite(event["loss"]) and event["tokens_per_second"] > 0 for event in events)
    for chart in METHODS[method].charts:  # every chart the Monitor offers for the method gets finite points
        # (KTO logs the rewards of a side only in steps whose batch has answers of that side)
        points = [event[chart.key] for event in events if chart.key in event]
        assert points and all(math.isfinite(point) for point in points), (chart.key, events)
    assert (run_dir / ("model" if "adapter" in extra else "adapter")).is_dir()


def demo_preference_config(method: str, **sections: dict) -> RunConfig:
    """A method on the bundled preference set (kto unpairs it): short rows, quick steps, a checkpoint every 2."""
    data = {
        "name": f"{method}-resume",
        "method": method,
        "data": {"path": DEMO_PREFERENCE, "max_samples": 48},
        "adapter": {"r": 8, "dropout": 0.0},
        "train": {
            "max_steps": RESUME_STEPS,
            "per_device_batch_size": 4,
            "learning_rate": 3e-3,
            "max_length": 64,
            "save_steps": 2,
            "logging_steps": 1,
        },
        "launch": {"threads_per_process": 1},  # repeatable bit for bit whatever the machine's load
    }
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return parse_config(data)


# Room to stop in: ORPO's steps take under 0.1 s, and a stop sent at step 3 of 8 once arrived after the last.
RESUME_STEPS = 16
# The metric that must move the policy's way over the run, per method (TRL's names).
PROGRESS = {"dpo": "rewards/margins", "orpo": "log_odds_ratio", "kto": "rewards/chosen"}


@pytest.mark.parametrize("method", ["dpo", "orpo", "kto"])
def test_stop_and_resume_reproduce_the_uninterrupted_losses(method: str, tmp_path: Path):
    reference, result = train_cli(demo_preference_config(method), tmp_path / "reference")
    assert result.returncode == 0, result.stderr[-3000:]
    expected = {event["step"]: event["loss"] for event in train_events(reference)}
    assert sorted(expected) == list(range(1, RESUME_STEPS + 1))
    progress = [event[PROGRESS[method]] for event in train_events(reference) if PROGRESS[method] in event]
    assert progress[-1] > progress[0]  # the policy moves towards the chosen answers

    run_dir = runs.create_run(demo_preference_config(method), run_dir=tmp_path / "run")
    stop_then_resume(run_dir, RESUME_STEPS)
    assert {event["step"]: event["loss"] for event in train_events(run_dir)} == expected  # step by step


def test_dpo_on_a_4bit_base_trains_its_adapter(tmp_path: Path):
    """QLoRA DPO: the base loaded 4-bit by bitsandbytes (on CPU), the reference being that base with the adapter
    off; the adapter alone is saved."""
    config = demo_preference_config("dpo", quantization={"mode": "4bit"}, train={"max_steps": 4, "save_steps": 4})
    run_dir, result = train_cli(config, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    events = train_events(run_dir)
    assert [event["step"] for event in events] == [1, 2, 3, 4]
    assert all(math.isfinite(event["loss"]) and math.isfinite(event["rewards/margins"]) for event in events)
    counted = r"model: ([\d,]+) trainable of ([\d,]+) parameters .*; ([\d,]+) of them stored 4-bit"
    stored = re.search(counted, log_of(run_dir))
    trainable, total, four_bit = (int(number.replace(",", "")) for number in stored.groups())
    assert 0 < trainable < four_bit < total  # the base's linear layers are 4-bit; the adapter trains
    adapter = run_dir / "adapter"
    assert (adapter / "adapter_model.safetensors").is_file() and not (adapter / "ref").exists()


def test_the_memory_estimate_holds_the_reference_that_trl_loads_beside_a_full_fine_tune(tmp_path: Path):
    """DPOTrainer loads a full or freeze fine-tune's reference again from the model's path, frozen: the estimate
    counts its bytes as loaded; an adapter's reference is the base with the adapter off, and precomputed
    reference scores need none kept (DPO and KTO alike)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from engine.training.check import check_run

    demo = str(PROJECT_ROOT / "assets" / "demo-model")
    rows = Dataset.from_list([{"prompt": "Which month?", "chosen": " March", "rejected": " May"}] * 2)
    args = DPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    model = AutoModelForCausalLM.from_pretrained(demo, dtype=torch.float32)
    trainer = DPOTrainer(
        model=model, args=args, train_dataset=rows, processing_class=AutoTokenizer.from_pretrained(demo)
    )
    reference = sum(parameter.numel() * parameter.element_size() for parameter in trainer.ref_model.parameters())

    def checked(method: str, adapter: str, precompute: bool = False) -> Any:
        settings = {method: {"precompute_ref_log_probs": precompute}} if method != "orpo" else {}
        config = parse_config(
            {"method": method, "adapter": {"method": adapter}, "data": {"path": DEMO_PREFERENCE}, **settings}
        )
        return check_run(config)

    def frozen(method: str, adapter: str, precompute: bool = False) -> float:
        memory = checked(method, adapter, precompute).memory
        assert memory is not None
        return memory.frozen

    for method in ("dpo", "kto"):
        assert frozen(method, "full") == pytest.approx(reference, rel=0.01)
        assert frozen(method, "freeze") == pytest.approx(reference, rel=0.01)
        assert frozen(method, "lora") == frozen(method, "full", precompute=True) == 0
    assert frozen("orpo", "full") == 0  # ORPO trains without a reference
    # The check says which reference the run has.
    reference = {
        (adapter, precompute): [line for line in checked("dpo", adapter, precompute).lines() if "reference: " in line]
        for adapter, precompute in (("full", False), ("lora", False), ("full", True))
    }
    assert reference == {
        ("full", False): ["reference: a frozen copy of the model, loaded beside it (counted as frozen below)"],
        ("lora", False): ["reference: the base, with the adapter off"],
        ("full", True): ["reference: scored once before training (precompute_ref_log_probs), then freed"],
    }

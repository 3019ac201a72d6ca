"""The DPO demo, measured: SFT teaches the demo model to answer "March 15"; DPO then teaches it "March 15th".

    python benchmarks/demo_dpo.py                    # trains the SFT demo first (about 80 s), then DPO
    python benchmarks/demo_dpo.py --sft-run DIR      # DPO from an SFT demo run that already exists

Both runs go through ``python -m engine train`` (assets/presets/demo.yaml, then assets/presets/demo-dpo.yaml with
``model.init_from`` set to the SFT run). On the 40 held-out pairs of assets/datasets/demo_dpo_eval.jsonl it
prints, for the DPO run's starting point (the SFT model) and its result:

- preference accuracy: how often the model ranks the chosen answer ("March 15th") above the rejected one
  ("March 15") by mean log-probability per token (engine.evaluate.preference.score_pairs);
- style: the share of greedy answers to the held-out prompts that write the day as an ordinal (1st, 2nd, 3rd,
  4th, ...), and the share that is exactly the chosen answer;
- the DPO run's wall time, process start to saved adapter.

Goals (issue): the DPO run within 2 minutes on 2 CPU cores; accuracy <= 60 % before and >= 90 % after; >= 80 %
of greedy answers in the preferred style.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from throughput import train_run  # noqa: E402  (benchmarks/ is the script's folder)

from engine.config import RunConfig, load_config  # noqa: E402

SFT_PRESET = ROOT / "assets" / "presets" / "demo.yaml"
DPO_PRESET = ROOT / "assets" / "presets" / "demo-dpo.yaml"
HELD_OUT = "assets/datasets/demo_dpo_eval.jsonl"
ORDINAL = re.compile(r"^[A-Z][a-z]+ \d{1,2}(st|nd|rd|th)$")


def merged(adapter: Path) -> Any:
    """The demo model with a run's adapter folded in (plain transformers + peft)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(ROOT / "assets" / "demo-model", dtype=torch.float32)
    return PeftModel.from_pretrained(base, adapter).merge_and_unload().eval()


def greedy_answers(model: Any, tokenizer: Any, rows: list[dict]) -> list[str]:
    """Each held-out prompt's greedy answer through the chat template."""
    import torch

    answers = []
    for row in rows:
        inputs = tokenizer.apply_chat_template(
            row["prompt"], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
        answers.append(tokenizer.decode(output[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip())
    return answers


def style_shares(answers: list[str], rows: list[dict]) -> tuple[float, float]:
    """The share of answers in the ordinal style, and the share that is exactly the chosen answer."""
    ordinal = sum(bool(ORDINAL.match(answer)) for answer in answers) / len(rows)
    exact = sum(answer == row["chosen"][0]["content"] for answer, row in zip(answers, rows, strict=True)) / len(rows)
    return ordinal, exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sft-run", type=Path, help="an SFT demo run to start from (else one is trained)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from engine.config.data import DataSection
    from engine.data import load_rows
    from engine.evaluate.preference import score_pairs

    with tempfile.TemporaryDirectory() as tmp:
        sft_run = args.sft_run
        if sft_run is None:
            sft_run = Path(tmp) / "sft"
            print(f"SFT demo run: {train_run(load_config(SFT_PRESET), sft_run):.0f} s", flush=True)
        data = load_config(DPO_PRESET).model_dump(mode="json")
        data["model"]["init_from"] = str(sft_run.resolve())
        dpo_run = Path(tmp) / "dpo"
        seconds = train_run(RunConfig.model_validate(data), dpo_run)
        print(f"DPO run (process start to saved adapter): {seconds:.0f} s  (goal <= 120 s)", flush=True)

        tokenizer = AutoTokenizer.from_pretrained(ROOT / "assets" / "demo-model")
        rows = load_rows(DataSection(path=HELD_OUT)).rows
        start, tuned = merged(sft_run / "adapter"), merged(dpo_run / "adapter")
        scores = score_pairs(tuned, tokenizer, None, rows, base_model=start, by_reward=True)
        before, after = scores["base"]["accuracy"], scores["tuned"]["accuracy"]
        print(f"held-out preference accuracy ({len(rows)} pairs): {before:.0%} -> {after:.0%}  (goal <= 60% -> >= 90%)")
        reward, margin = scores["tuned"]["reward_accuracy"], scores["tuned"]["mean_margin"]
        print(f"  after DPO by implicit reward: {reward:.0%}, mean reward margin {margin:.2f}")
        for name, model in (("SFT start", start), ("after DPO", tuned)):
            answers = greedy_answers(model, tokenizer, rows)
            ordinal, exact = style_shares(answers, rows)
            print(
                f"greedy answers, {name}: {ordinal:.0%} ordinal style, {exact:.0%} exactly the chosen answer "
                f"(e.g. {answers[0]!r} for {rows[0]['chosen'][0]['content']!r})"
            )
        print("goal: >= 80% of greedy answers in the preferred style after DPO")


if __name__ == "__main__":
    main()

"""The model card (README.md) written into an export: what was trained, how, and how well.

Numbers come from the run directory (metrics.jsonl, status.json, the newest evaluation), the settings from
config.yaml, which never holds a secret. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.evaluate.evaluations import latest_evaluation
from engine.export.exports import ExportPlan
from engine.store.rundir import iter_metrics


@dataclass(frozen=True)
class FinalMetrics:
    """The closing numbers of a run, read from metrics.jsonl."""

    step: int | None
    train_loss: float | None  # the last logged training loss
    eval_loss: float | None  # the last eval_loss, if the run evaluated
    mean_train_loss: float | None  # Trainer's summary: the mean loss over the whole run
    runtime_s: float | None


def final_metrics(events: list[dict[str, Any]]) -> FinalMetrics:
    """The last training loss, last eval loss and the summary of a run's metric events."""
    train = [e for e in events if e.get("event") == "train" and _finite(e.get("loss"))]
    evals = [e for e in events if e.get("event") == "eval" and _finite(e.get("eval_loss"))]
    summary = next((e for e in reversed(events) if e.get("event") == "summary"), {})
    return FinalMetrics(
        step=train[-1]["step"] if train else None,
        train_loss=train[-1]["loss"] if train else None,
        eval_loss=evals[-1]["eval_loss"] if evals else None,
        mean_train_loss=summary.get("train_loss") if _finite(summary.get("train_loss")) else None,
        runtime_s=summary.get("train_runtime"),
    )


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _table(rows: list[tuple[str, str]]) -> str:
    return "\n".join(["| metric | value |", "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)])


def _results(plan: ExportPlan, metrics: FinalMetrics) -> str:
    rows = [("steps", str(plan.run.status.step or metrics.step or "—"))]
    if metrics.train_loss is not None:
        rows.append(("final train loss", f"{metrics.train_loss:.4f}"))
    if metrics.mean_train_loss is not None:
        rows.append(("mean train loss", f"{metrics.mean_train_loss:.4f}"))
    if metrics.eval_loss is not None:
        rows.append(("final eval loss", f"{metrics.eval_loss:.4f}"))
    evaluation = latest_evaluation(plan.run.run_dir)
    if evaluation:
        base, tuned = evaluation.get("base") or {}, evaluation.get("tuned") or {}
        where = f"{evaluation['data']['choice']} set, {evaluation['data']['rows']} rows"
        if _finite(base.get("eval_loss")) and _finite(tuned.get("eval_loss")):
            rows.append((f"eval loss, base → tuned ({where})", f"{base['eval_loss']:.4f} → {tuned['eval_loss']:.4f}"))
        if tuned.get("exact_match") is not None:
            rows.append(
                (f"exact match, base → tuned ({where})", f"{base['exact_match']:.1%} → {tuned['exact_match']:.1%}")
            )
    return _table(rows)


def _usage(plan: ExportPlan, base_model: str) -> str:
    if plan.kind == "adapter":
        return (
            "```python\nfrom peft import AutoPeftModelForCausalLM\nfrom transformers import AutoTokenizer\n\n"
            'model = AutoPeftModelForCausalLM.from_pretrained("PATH_OR_REPO")\n'
            'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")\n```\n\n'
            f"The adapter loads on top of `{base_model}`, which must be available where it is loaded."
        )
    return (
        "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
        'model = AutoModelForCausalLM.from_pretrained("PATH_OR_REPO")\n'
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")\n```'
    )


def model_card(plan: ExportPlan) -> str:
    """The README.md of an export: front matter for the hub, results, usage and the full training config."""
    config = plan.run.config
    base_model = config.model.name_or_path
    metrics = final_metrics(list(iter_metrics(plan.run.run_dir)))
    adapter = config.adapter
    if adapter.is_lora:
        quantized = (
            f", trained on a {config.quantization.mode} base (QLoRA)" if config.quantization.mode != "none" else ""
        )
        method = f"LoRA (r={adapter.r}, alpha={adapter.alpha:g}, target modules: {adapter.target_modules}){quantized}"
    else:
        method = f"{adapter.method} fine-tuning"
    what = (
        "a LoRA adapter"
        if plan.kind == "adapter"
        else f"the fine-tuned weights merged into the base, saved in {plan.dtype} safetensors"
    )
    library = "peft" if plan.kind == "adapter" else "transformers"
    data = ", ".join(f"`{path}`" for path in config.data.paths())  # one file, or each of a list of datasets
    return "\n".join(
        [
            "---",
            f"base_model: {base_model}",
            f"library_name: {library}",
            "pipeline_tag: text-generation",
            "tags:",
            "- tuning-studio",
            "- sft",
            *(["- lora"] if adapter.is_lora else []),
            "---",
            "",
            f"# {plan.run.name}",
            "",
            f"Fine-tuned from `{base_model}` with {method} on {data}. "
            f"This export holds {what} ({plan.weights.label} of run `{plan.run.run_dir.name}`), "
            "with the tokenizer and its chat template.",
            "",
            "## Results",
            "",
            _results(plan, metrics),
            "",
            "## Use",
            "",
            _usage(plan, base_model),
            "",
            "## Training config",
            "",
            "```yaml",
            config.to_yaml().rstrip(),
            "```",
            "",
        ]
    )

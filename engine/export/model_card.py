"""The model card (README.md) written into an export: what was trained, how, and how well.

Numbers come from the run directory (metrics.jsonl, status.json, the newest evaluation), the settings from
config.yaml, which never holds a secret. Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.evaluate.evaluations import (
    SCORING_PREFERENCE,
    SCORING_REWARDS,
    is_unpaired,
    latest_evaluation,
    scoring_of,
)
from engine.export.exports import ExportPlan
from engine.store.paths import find_local_path, is_hub_id
from engine.store.rundir import iter_metrics
from engine.training.methods import method_of
from engine.training.modality import model_kind

# A model in the hub's cache: .../models--<org>--<name>/snapshots/<revision>
_CACHED_REPO = re.compile(r"^models--(.+)$")


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
        rows.extend(evaluation_rows(evaluation))
    return _table(rows)


def evaluation_rows(evaluation: dict[str, Any]) -> list[tuple[str, str]]:
    """The newest evaluation's numbers as model-card rows, each labelled with what it compares and on what data:
    eval loss and exact match (answers), preference accuracy and margin (preference), each reward function's mean,
    the weighted reward and exact match (rewards; against the run it started from when that is the baseline).
    A number the evaluation does not have (no reference answers, a method without a reference) has no row."""
    base, tuned = evaluation.get("base") or {}, evaluation.get("tuned") or {}
    data = evaluation.get("data") or {}
    where = f"{data.get('choice', '?')} set, {data.get('rows', '?')} rows"
    if evaluation.get("references") == "teacher":  # a distill run, scored against its teacher's greedy answers
        where += ", against the teacher's answers"
    baseline = evaluation.get("baseline") or "base"
    against = "base" if baseline == "base" else f"start run {baseline}"

    def change(name: str, pair: tuple[Any, Any], shown: Callable[[Any], str | None]) -> tuple[str, str | None]:
        before, after = shown(pair[0]), shown(pair[1])
        both = before is not None and after is not None
        return f"{name}, {against} → tuned ({where})", f"{before} → {after}" if both else None

    def sides(key: str) -> tuple[Any, Any]:
        return base.get(key), tuned.get(key)

    def alone(name: str, value: str | None) -> tuple[str, str | None]:
        return f"{name}, tuned ({where})", value

    scoring = scoring_of(evaluation)
    if scoring == SCORING_PREFERENCE:
        shares = (
            [alone("desirable answers above the median reward", _percent(tuned.get("reward_accuracy")))]
            if is_unpaired(evaluation)
            else [
                change("preference accuracy", sides("accuracy"), _percent),
                alone("reward accuracy", _percent(tuned.get("reward_accuracy"))),
            ]
        )
        rows = [*shares, alone("mean reward margin", _decimal(tuned.get("mean_margin")))]
    elif scoring == SCORING_REWARDS:
        means = (base.get("rewards") or {}, tuned.get("rewards") or {})
        each = [
            change(f"reward {name}", (means[0].get(name), means[1].get(name)), _decimal)
            for name in evaluation.get("reward_weights") or {}
        ]
        rows = [
            change("weighted reward", sides("reward"), _decimal),
            *each,
            change("exact match", sides("exact_match"), _percent),
        ]
    else:
        rows = [
            change("eval loss", sides("eval_loss"), _decimal),
            change("exact match", sides("exact_match"), _percent),
        ]
    return [(name, value) for name, value in rows if value is not None]


def _decimal(value: Any) -> str | None:
    return f"{value:.4f}" if _finite(value) else None


def _percent(value: Any) -> str | None:
    return f"{value:.1%}" if _finite(value) else None


def hub_base_model(name_or_path: str) -> str | None:
    """The hub id of the base model, for the card's ``base_model``: the name when it is a hub id and no local
    folder, or the repo a folder of the hub's cache holds; None for another local folder (the hub takes only ids,
    and a path says nothing where the export is read)."""
    local = find_local_path(name_or_path)
    if local is None:
        return name_or_path if is_hub_id(name_or_path) else None
    parts = local.parts
    for index, part in enumerate(parts[:-2]):
        found = _CACHED_REPO.match(part)
        if found and parts[index + 1] == "snapshots":
            return found.group(1).replace("--", "/", 1)
    return None


def _base_words(name_or_path: str, hub_id: str | None) -> str:
    """The base model as the card's text names it: its hub id, else the local folder's name (no path)."""
    if hub_id is not None:
        return f"`{hub_id}`"
    name = (find_local_path(name_or_path) or name_or_path).name if name_or_path else name_or_path
    return f"the local model `{name}` (not on the hub)"


def _usage(plan: ExportPlan, base_model: str) -> str:
    kind = model_kind(plan.run.config)
    if plan.kind == "gguf":
        name = plan.target.name
        return (
            f"```sh\nollama create {name} -f Modelfile   # in this folder\nollama run {name}\n\n"
            f"llama-cli -m {name}.gguf -cnv                 # or llama.cpp itself\n```"
        )
    if plan.kind == "gguf-lora":
        return (
            f"```sh\nllama-cli -m BASE.gguf --lora {plan.target.name}.gguf -cnv\n```\n\n"
            f"BASE.gguf is {base_model} as GGUF (in Ollama: `FROM` it and `ADAPTER ./{plan.target.name}.gguf`)."
        )
    if plan.kind == "adapter":
        loader = kind.peft_auto_class
        head = "".join(f", {name}={value!r}" for name, value in kind.head_kwargs)  # the base loads with its head
        return (
            f"```python\nfrom peft import {loader}\nfrom transformers import AutoTokenizer\n\n"
            f'model = {loader}.from_pretrained("PATH_OR_REPO"{head})\n'
            'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")\n```\n\n'
            f"The adapter loads on top of {base_model}, which must be available where it is loaded."
        )
    return (
        f"```python\nfrom transformers import {kind.auto_class}, AutoTokenizer\n\n"
        f'model = {kind.auto_class}.from_pretrained("PATH_OR_REPO")\n'
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")\n```'
    )


def model_card(plan: ExportPlan) -> str:
    """The README.md of an export: front matter for the hub, results, usage and the full training config."""
    config = plan.run.config
    hub_id = hub_base_model(config.model.name_or_path)
    base_model = _base_words(config.model.name_or_path, hub_id)
    metrics = final_metrics(list(iter_metrics(plan.run.run_dir)))
    adapter = config.adapter
    if adapter.is_lora:
        quantized = (
            f", trained on a {config.quantization.mode} base (QLoRA)" if config.quantization.mode != "none" else ""
        )
        method = f"LoRA (r={adapter.r}, alpha={adapter.alpha:g}, target modules: {adapter.target_modules}){quantized}"
    else:
        method = f"{adapter.method} fine-tuning"
    what = {
        "adapter": "a LoRA adapter",
        "gguf": f"the fine-tuned weights merged into the base as one GGUF file ({plan.gguf_type}) for llama.cpp, "
        "with an Ollama Modelfile",
        "gguf-lora": f"the LoRA adapter as a llama.cpp GGUF adapter ({plan.gguf_type})",
    }.get(plan.kind, f"the fine-tuned weights merged into the base, saved in {plan.dtype} safetensors")
    library = {"adapter": "peft", "gguf": "gguf", "gguf-lora": "gguf"}.get(plan.kind, "transformers")
    start = f", starting from run `{config.model.init_from}`," if config.model.init_from else ""
    data = ", ".join(f"`{path}`" for path in config.data.paths())  # one file, or each of a list of datasets
    return "\n".join(
        [
            "---",
            *([f"base_model: {hub_id}"] if hub_id else []),
            f"library_name: {library}",
            "pipeline_tag: text-generation",
            "tags:",
            "- tuning-studio",
            f"- {config.method}",
            *(["- lora"] if adapter.is_lora else []),
            "---",
            "",
            f"# {plan.run.name}",
            "",
            f"Fine-tuned from {base_model}{start} with {method} on {data}; "
            f"training method: {method_of(config).title}. "
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

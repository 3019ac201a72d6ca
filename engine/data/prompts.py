"""Prompt rows for GRPO: what the model answers, and the reference its rewards compare against.

GRPO samples its own answers, so a row gives only its prompt, in TRL's conversational form, beside the columns
the reward functions read. From a conversation (or instruction / prompt-completion) row, the turns before the
final assistant answer are the prompt and that answer is the reference column ``answer``:
``{"prompt": [messages], "answer": str, "ts_row": n}``. ``ts_row`` is the row's number in its file, so a reward
that fails names the row (engine.training.rewards).

TRL 1.16 has no prompt length limit of its own: a prompt longer than ``train.max_length`` tokens (with the chat
template's generation prompt) is dropped with a warning, as the other methods drop rows that cannot train.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.data.errors import DataError
from engine.data.pipeline import DataReport, guard_chat_template, select_rows, start_report
from engine.data.rows import LoadedRows
from engine.data.template_guard import TRAIN_BUDGET_S

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.data.prepare import PreparedData

REFERENCE_COLUMN = "answer"
ROW_COLUMN = "ts_row"


def prompt_row(row: dict[str, Any], number: int) -> dict[str, Any] | None:
    """A canonical conversation row as a GRPO prompt with its reference answer; None when it has no prompt."""
    messages = row.get("messages") or []
    answers = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
    end = answers[-1] if answers else len(messages)
    prompt = [{"role": m["role"], "content": m["content"]} for m in messages[:end]]
    if not any(message["role"] == "user" for message in prompt):
        return None
    shaped: dict[str, Any] = {"prompt": prompt, ROW_COLUMN: number}
    if answers:
        shaped[REFERENCE_COLUMN] = messages[end]["content"]
    return shaped


def prepare_prompt_datasets(config: RunConfig, tokenizer: Any) -> PreparedData:
    """The run's prompts (train and eval) for TRL's GRPOTrainer, checked like every method's data; raises
    DataError when no prompt fits."""
    import datasets

    from engine.data.prepare import PreparedData

    data, max_length = config.data, config.train.max_length
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, config.train.seed)
    parts = [(loaded, train_idx), *([(eval_loaded, eval_idx)] if eval_loaded is not None else [])]
    guard_chat_template(data, tokenizer, parts, TRAIN_BUDGET_S)
    report = start_report(data, loaded, train_idx, eval_loaded, eval_idx)
    train = _prompts(loaded, train_idx, tokenizer, max_length, report, "")
    if not train:
        raise DataError(
            f"{loaded.source}: no row has a prompt (a user turn) that fits max_length {max_length} tokens; "
            "raise train.max_length or check the data"
        )
    evaluation = None
    if eval_loaded is not None and eval_idx:
        evaluation = _prompts(eval_loaded, eval_idx, tokenizer, max_length, report, "eval ") or None
        report.num_eval_rows = len(evaluation or [])
    report.num_rows = len(train)
    report.columns = list(dict.fromkeys(key for row in train for key in row))
    as_dataset = datasets.Dataset.from_list
    return PreparedData(as_dataset(train), as_dataset(evaluation) if evaluation else None, report)


def first_prompt_rows(config: RunConfig, n: int = 2) -> list[dict[str, Any]]:
    """The first ``n`` training rows as prompt rows (for checking the reward functions before launch)."""
    loaded, train_idx, _, _ = select_rows(config.data, config.train.seed)
    rows = (prompt_row(loaded.rows[index], loaded.where(index)[1]) for index in train_idx)
    return [row for row in rows if row is not None][:n]


def _prompts(
    loaded: LoadedRows, indices: list[int], tokenizer: Any, max_length: int, report: DataReport, label: str
) -> list[dict[str, Any]]:
    """The prompt rows of ``indices`` that fit ``max_length``; the rows left out are counted in a warning."""
    kept, without_prompt, too_long, tokens = [], 0, 0, 0
    for index in indices:
        shaped = prompt_row(loaded.rows[index], loaded.where(index)[1])
        if shaped is None:
            without_prompt += 1
            continue
        rendered = tokenizer.apply_chat_template(shaped["prompt"], add_generation_prompt=True, tokenize=True)
        length = len(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)  # transformers 5: a mapping
        if length > max_length:
            too_long += 1
            continue
        tokens += length
        kept.append(shaped)
    if without_prompt:
        report.warnings.append(f"{without_prompt} of {len(indices)} {label}rows have no user turn to answer")
    if too_long:
        report.warnings.append(
            f"{too_long} of {len(indices)} {label}prompts are longer than max_length {max_length} tokens "
            "and are dropped"
        )
        report.num_dropped += too_long if not label else 0
    if not label:
        report.num_tokens = tokens
        report.num_loss_tokens = 0  # the loss falls on the sampled answers, which the data does not hold
    return kept

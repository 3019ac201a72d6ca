"""Prompt rows for GRPO: what the model answers, and the columns its reward functions read.

GRPO samples its own answers, so a row gives only its prompt, in TRL's conversational form, beside the columns
the reward functions read. From a conversation (or instruction / prompt-completion) row, the turns before the
final assistant answer are the prompt and that answer is the reference column ``answer``; a prompt-only row
(format ``prompt``) is all prompt and has no derived answer: ``{"prompt": [messages], "answer": str, "ts_row": n}``.
``ts_row`` is the row's number in its file, so a reward that fails names the row (engine.training.rewards).

The row's other columns in the file, those its format does not read (``solution``, ``difficulty``, an ``answer``
of its own; engine.data.rows.LoadedRows.extras), join its prompt row as they are, as TRL passes every dataset
column but the prompt to the reward functions. An ``answer`` column of the data wins over the derived final
answer: the user named it, and a conversation's last turn is often a worked solution rather than the answer to
compare with. Where a row's own ``answer`` is missing (None) the derived one stays. They never replace ``prompt``
or ``ts_row``. Rows that lack a column others have get None for it (a dataset has one schema), which the built-in
rewards read as "not applicable" and TRL leaves out of that row's reward.

TRL 1.16 has no prompt length limit of its own: a prompt longer than ``train.max_length`` tokens (with the chat
template's generation prompt) is dropped with a warning, as the other methods drop rows that cannot train.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engine.data.errors import DataError
from engine.data.pipeline import DataReport, guard_chat_template, select_rows, start_report
from engine.data.rows import LoadedRows
from engine.data.template_guard import TRAIN_BUDGET_S
from engine.data.warnings import EVAL_LABEL, warning

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.data.prepare import PreparedData

REFERENCE_COLUMN = "answer"
ROW_COLUMN = "ts_row"
PROMPT_COLUMN = "prompt"
# Column names TRL 1.16's GRPOTrainer gives a meaning of its own: such a column cannot reach the reward functions.
TRL_NAMES = {
    **dict.fromkeys(
        ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"),
        "it passes an argument of that name to the reward functions",
    ),
    "completion": "it leaves that column out of the reward functions' arguments",
    "image": "it reads the column as the prompt's image, for vision models",
    "images": "it reads the column as the prompt's images, for vision models",
}


def prompt_row(row: dict[str, Any], number: int, extras: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A canonical conversation row as a GRPO prompt with its reference answer and its ``extras`` (the row's
    extra columns, see the module's docstring); None when it has no prompt (no user turn)."""
    messages = row.get("messages") or []
    start = row.get("prompt_turns", 0)  # assistant turns before it are context in the prompt, not answers
    answers = [i for i, message in enumerate(messages) if message["role"] == "assistant" and i >= start]
    end = answers[-1] if answers else len(messages)
    prompt = [{"role": m["role"], "content": m["content"]} for m in messages[:end]]
    if not any(message["role"] == "user" for message in prompt):
        return None
    shaped: dict[str, Any] = {PROMPT_COLUMN: prompt, ROW_COLUMN: number}
    if answers:
        shaped[REFERENCE_COLUMN] = messages[end]["content"]
    for key, value in (extras or {}).items():
        if key in (PROMPT_COLUMN, ROW_COLUMN) or (value is None and key in shaped):
            continue
        shaped[key] = value
    return shaped


def as_dataset(rows: list[dict[str, Any]], source: str) -> Any:
    """Prompt rows (after uniform_columns) as a ``datasets.Dataset``: every row with every key (None where it lacks
    one), since a dataset takes its schema from the first rows and would drop a column they lack. Raises DataError
    for a column whose values still differ in shape (a list of numbers here, of strings there)."""
    import datasets

    keys = list(dict.fromkeys(key for row in rows for key in row))
    complete = [{key: row.get(key) for key in keys} for row in rows]
    try:
        return datasets.Dataset.from_list(complete)
    except (TypeError, ValueError) as exc:  # pyarrow's ArrowTypeError and ArrowInvalid
        key = next((key for key in keys if not _builds([{key: row[key]} for row in complete])), None)
        raise DataError(
            f"{source}: the values of the column {key!r} differ in shape from row to row ({exc}); "
            "a dataset column has one type: make them alike"
        ) from None


def _builds(rows: list[dict[str, Any]]) -> bool:
    """Whether the rows form a dataset (their values share one type per column)."""
    import datasets

    try:
        datasets.Dataset.from_list(rows)
    except (TypeError, ValueError):
        return False
    return True


def uniform_columns(rows: list[dict[str, Any]], where: list[tuple[str, int]]) -> list[str]:
    """Give each column of the prompt rows one type, as a dataset column needs, in place. A column that mixes
    strings, numbers and booleans (``"4"`` here, ``6`` there) becomes strings, the others written as JSON writes
    them, with a warning. Raises DataError for one that mixes lists, objects and single values, naming a row of
    each. ``where``: each row's file and row number."""
    warnings = []
    for key in dict.fromkeys(key for row in rows for key in row if key != PROMPT_COLUMN):
        firsts: dict[str, int] = {}  # each kind of value in the column -> the first row that has it
        for index, row in enumerate(rows):
            if row.get(key) is not None:
                firsts.setdefault(_kind(row[key]), index)
        if len(firsts) < 2:
            continue
        kinds = " and ".join(f"{kind}s" for kind in firsts)
        shown = ", ".join(f"row {where[i][1]} of {where[i][0]}: {_short(rows[i][key])}" for i in firsts.values())
        if not set(firsts) <= {"string", "number", "boolean"}:
            raise DataError(f"the column {key!r} mixes {kinds} ({shown}); give it values of one type")
        for row in rows:
            if row.get(key) is not None and not isinstance(row[key], str):
                row[key] = json.dumps(row[key])
        warnings.append(f"the column {key!r} mixes {kinds} ({shown}); the reward functions get them all as strings")
    return warnings


def _kind(value: Any) -> str:
    """What a value is, as JSON says it: string, number, boolean, list or object."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    return "object" if isinstance(value, dict) else type(value).__name__


def _short(value: Any, limit: int = 40) -> str:
    """A value as a message shows it."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def prepare_prompt_datasets(config: RunConfig, tokenizer: Any) -> PreparedData:
    """The run's prompts (train and eval) for TRL's GRPOTrainer, checked like every method's data; raises
    DataError when no prompt fits."""
    from engine.data.prepare import PreparedData

    data, max_length = config.data, config.train.max_length
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, config.train.seed)
    parts = [(loaded, train_idx), *([(eval_loaded, eval_idx)] if eval_loaded is not None else [])]
    for part, _ in parts:
        require_plain_columns(part)
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
        evaluation = _prompts(eval_loaded, eval_idx, tokenizer, max_length, report, EVAL_LABEL) or None
        report.num_eval_rows = len(evaluation or [])
    report.num_rows = len(train)
    report.columns = list(dict.fromkeys(key for row in train for key in row))
    evaluated = as_dataset(evaluation, eval_loaded.source) if evaluation and eval_loaded is not None else None
    return PreparedData(as_dataset(train, loaded.source), evaluated, report)


def first_prompt_rows(config: RunConfig, n: int = 2) -> list[dict[str, Any]]:
    """The first ``n`` training rows as prompt rows, then for each column the first row with a value for it and
    the first that lacks it (absent or None), in training order: the rows the reward check before launch calls the
    rewards on (engine.training.rewards.check_rewards), so that it can tell a column no row has from one that some
    rows lack, and name the first such row."""
    loaded, train_idx, _, _ = select_rows(config.data, config.train.seed)
    shaped, _ = prompt_rows(loaded, train_idx)
    picked = dict.fromkeys(range(min(n, len(shaped))))
    for key in dict.fromkeys(key for row in shaped for key in row):
        for valued in (True, False):
            first = next((i for i, row in enumerate(shaped) if (row.get(key) is not None) == valued), None)
            if first is not None:
                picked.setdefault(first)
    return [shaped[i] for i in sorted(picked)]


def prompt_rows(loaded: LoadedRows, indices: list[int]) -> tuple[list[dict[str, Any]], int]:
    """The rows at ``indices`` as prompt rows shaped as training shapes them (numbered by their row in the file,
    with their extra columns, each column of one type: the rewards see the same values; the warnings are the
    training's to give), and how many had no prompt. Raises DataError for a column TRL would not pass to the reward
    functions."""
    require_plain_columns(loaded)
    pairs = [(row, loaded.where(index)) for index in indices if (row := _prompt_row(loaded, index)) is not None]
    rows = [row for row, _ in pairs]
    uniform_columns(rows, [where for _, where in pairs])
    return rows, len(indices) - len(rows)


def require_plain_columns(loaded: LoadedRows) -> None:
    """Raise DataError for an extra column that TRL would not hand to the reward functions as it is (TRL_NAMES)."""
    name = next((key for extra in loaded.extras or () for key in extra if key in TRL_NAMES), None)
    if name is not None:
        raise DataError(
            f"{loaded.source}: the column {name!r} cannot reach the reward functions: TRL uses that name itself "
            f"({TRL_NAMES[name]}); rename the column"
        )


def _prompt_row(loaded: LoadedRows, index: int) -> dict[str, Any] | None:
    """``loaded.rows[index]`` as a prompt row with its extra columns, numbered by its row in its file."""
    return prompt_row(loaded.rows[index], loaded.where(index)[1], loaded.extra(index))


def _prompts(
    loaded: LoadedRows, indices: list[int], tokenizer: Any, max_length: int, report: DataReport, label: str
) -> list[dict[str, Any]]:
    """The prompt rows of ``indices`` that fit ``max_length``; the rows left out are counted in a warning, and so
    is a column that some of the rows kept lack."""
    kept, numbers, without_prompt, too_long, tokens = [], [], 0, 0, 0
    for index in indices:
        shaped = _prompt_row(loaded, index)
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
        numbers.append(loaded.where(index))
    report.warnings += _column_warnings(kept, numbers, label)
    if without_prompt:
        report.warnings.append(warning("no_user_turn", count=without_prompt, total=len(indices), label=label))
    if too_long:
        counts = {"total": len(indices), "label": label, "max_length": max_length}
        report.warnings.append(warning("prompts_too_long", count=too_long, **counts))
        report.num_dropped += too_long if not label else 0
    if not label:
        report.num_tokens = tokens
        report.num_loss_tokens = 0  # the loss falls on the sampled answers, which the data does not hold
    return kept


def _column_warnings(rows: list[dict[str, Any]], where: list[tuple[str, int]], label: str) -> list[str]:
    """Give each column of the rows one type (uniform_columns); warn of columns changed and of columns some lack."""
    changed = [f"{label}prompts: {line}" if label else line for line in uniform_columns(rows, where)]
    return changed + missing_column_warnings(rows, where, label)


def missing_column_warnings(rows: list[dict[str, Any]], where: list[tuple[str, int]], label: str = "") -> list[str]:
    """A warning for each column that some prompt rows have and others lack (absent or None), naming the first
    row that lacks it (``where``: each row's file and row number): a reward that reads it gets None there."""
    warnings = []
    for key in dict.fromkeys(key for row in rows for key in row):
        lacking = [i for i, row in enumerate(rows) if row.get(key) is None]
        if lacking and len(lacking) < len(rows):
            source, number = where[lacking[0]]
            warnings.append(
                f"{len(lacking)} of {len(rows)} {label}prompts have no {key!r} (the first: row {number} of "
                f"{source}); reward functions get None for it there, which the built-in rewards read as not "
                "applicable"
            )
    return warnings

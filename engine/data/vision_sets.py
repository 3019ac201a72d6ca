"""The datasets of a vision-language run: checked rows whose images load on the fly, counted as the model reads
them.

TRL's SFTTrainer trains a vision-language model with its own collator (DataCollatorForVisionLanguageModeling):
each batch's conversations and images go through the processor's chat template there, since turning every image
into pixels up front would hold them all in memory. So the datasets here hold rows, not tokens: each item is
``{"messages": [content parts], "images": [PIL images]}``, the images read from disk and scaled down to
``vision.max_pixels`` when the item is taken.

Before that, every row is rendered once through the same processor and template, images included, to count its
tokens and the tokens that carry loss (``return_assistant_tokens_mask``, what the collator masks with), so the
report, the memory estimate and the refusal of rows with nothing to learn say what training will see. A row longer
than max_length is dropped when the cut would fall inside its image tokens (the processor refuses images whose
tokens are cut); a row cut after its last image is truncated as text rows are.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from engine.data.errors import DataError
from engine.data.images import load_image
from engine.data.pipeline import TokenizedSet, add_token_counts, select_rows, start_report
from engine.data.tokenize import TokenizedRow
from engine.data.vision_rows import content_parts
from engine.data.warnings import EVAL_LABEL, warning

if TYPE_CHECKING:
    import datasets

    from engine.config import RunConfig
    from engine.data.mixture import AcceptDataset
    from engine.data.pipeline import DataReport
    from engine.data.prepare import PreparedData
    from engine.data.rows import LoadedRows


def image_conversations(rows: list[dict[str, Any]], max_pixels: int) -> datasets.Dataset:
    """Rows a vision-language trainer reads: a dataset of canonical messages and image paths whose items come out as
    content parts and PIL images (``with_transform``: each image is read when its item is taken, not held)."""
    import datasets

    columns = {"messages": [row["messages"] for row in rows], "images": [row["images"] for row in rows]}
    return datasets.Dataset.from_dict(columns).with_transform(partial(_as_examples, max_pixels=max_pixels))


def _as_examples(batch: dict[str, list[Any]], max_pixels: int) -> dict[str, list[Any]]:
    rows = [
        {"messages": messages, "images": images}
        for messages, images in zip(batch["messages"], batch["images"], strict=True)
    ]
    examples = [as_example(row, max_pixels) for row in rows]
    return {"messages": [one["messages"] for one in examples], "images": [one["images"] for one in examples]}


def as_example(row: dict[str, Any], max_pixels: int) -> dict[str, Any]:
    """A canonical vision row as TRL's collator takes it: messages of content parts and the images as PIL images."""
    return {
        "messages": content_parts(row["messages"]),
        "images": [load_image(path, max_pixels) for path in row["images"]],
    }


def with_images(messages: list[dict[str, Any]], image_paths: list[str], max_pixels: int) -> list[dict[str, Any]]:
    """Canonical messages (``<image>`` where each image goes) as a processor's chat template takes them to prompt a
    model: content parts, each image part holding its image, read and scaled down to ``max_pixels``."""
    return _with_images(
        {"messages": content_parts(messages), "images": [load_image(p, max_pixels) for p in image_paths]}
    )


def training_template(processor: Any, answers_only: bool) -> str:
    """The chat template the collator renders with: the processor's own, or, when the loss is kept to the answers
    and it marks none (``{% generation %}``), TRL's training version of it. Raises DataError when there is none."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = processor.chat_template
    if not answers_only or has_generation_markers(template):
        return template
    try:
        patched = get_training_chat_template(processor)
    except ValueError:
        patched = None
    if not patched:
        raise DataError(
            "the model's chat template does not mark the assistant's answers ({% generation %}), and TRL has no "
            "training version of it, so the loss cannot be kept to the answers; set data.chat_template to a template "
            "with generation markers, or data.completion_only_loss to false"
        )
    return patched


def tokenize_vision_rows(
    loaded: LoadedRows,
    indices: list[int],
    processor: Any,
    template: str,
    max_length: int,
    max_pixels: int,
    answers_only: bool,
    label: str = "",
) -> TokenizedSet:
    """Each chosen row rendered through the processor with its images: its tokens and loss mask, cut to max_length;
    rows left with no loss token, or whose image tokens the cut would split, are dropped (with a warning)."""
    image_tokens = _image_token_ids(processor)
    kept: list[TokenizedRow] = []
    numbers: list[int] = []
    too_long = dropped = 0
    for index in indices:
        ids, mask = _render(loaded, index, processor, template, max_pixels, answers_only)
        row = TokenizedRow(ids[:max_length], mask[:max_length], len(ids))
        too_long += row.truncated
        images_cut = row.truncated and not image_tokens.isdisjoint(ids[max_length:])
        if images_cut or row.num_loss_tokens == 0:
            dropped += 1
            continue
        kept.append(row)
        numbers.append(index + 1)
    counts = {"total": len(indices), "label": label, "max_length": max_length}
    warnings = []
    if too_long:
        warnings.append(warning("rows_too_long", count=too_long, **counts))
    if dropped:
        warnings.append(warning("vision_rows_dropped", count=dropped, **counts))
    return TokenizedSet(kept, numbers, too_long, dropped, warnings)


@dataclass(frozen=True)
class VisionCheck:
    """What decides how a run's vision rows are counted: the template, max_length, the image cap, answers only."""

    template: str
    max_length: int
    max_pixels: int
    answers_only: bool

    @classmethod
    def of(cls, config: RunConfig, processor: Any) -> VisionCheck:
        """The run's settings (raises DataError when the loss cannot be kept to the answers: training_template)."""
        answers_only = config.data.completion_only_loss
        template = training_template(processor, answers_only)
        return cls(template, config.train.max_length, config.vision.max_pixels, answers_only)

    def tokenize(self, loaded: LoadedRows, indices: list[int], processor: Any, label: str = "") -> TokenizedSet:
        """tokenize_vision_rows with these settings."""
        return tokenize_vision_rows(
            loaded, indices, processor, self.template, self.max_length, self.max_pixels, self.answers_only, label
        )


def inspect_vision_dataset(config: RunConfig, processor: Any, accept: AcceptDataset | None = None) -> DataReport:
    """The dataset check of a vision-language run: rows and images checked, every training row rendered through the
    processor (raises DataError when none keeps something to learn)."""
    return _checked(config, processor, accept)[0]


def prepare_vision_datasets(config: RunConfig, processor: Any) -> PreparedData:
    """The training and eval sets of a vision-language run (image_conversations), with the report."""
    from engine.data.prepare import PreparedData

    report, train, evaluation = _checked(config, processor)
    return PreparedData(train, evaluation, report)


def _checked(
    config: RunConfig, processor: Any, accept: AcceptDataset | None = None
) -> tuple[DataReport, datasets.Dataset, datasets.Dataset | None]:
    settings = VisionCheck.of(config, processor)
    loaded, train_idx, eval_loaded, eval_idx = select_rows(config.data, config.train.seed, accept)
    train_set = settings.tokenize(loaded, train_idx, processor)
    if not train_set.rows:
        raise DataError(
            f"{loaded.source}: no training row keeps its images and a token to learn from within max_length "
            f"{settings.max_length}; raise train.max_length or lower vision.max_pixels (fewer image tokens)"
        )
    report = start_report(config.data, loaded, train_idx, eval_loaded, eval_idx)
    add_token_counts(report, train_set)
    report.num_images = sum(len(loaded.rows[number - 1]["images"]) for number in train_set.numbers)
    evaluation = None
    if eval_loaded is not None:
        eval_set = settings.tokenize(eval_loaded, eval_idx, processor, label=EVAL_LABEL)
        report.warnings += [line for line in eval_set.warnings if line not in report.warnings]
        report.num_eval_rows = len(eval_set.numbers)
        evaluation = _dataset(eval_loaded, eval_set, settings.max_pixels) if eval_set.rows else None
    return report, _dataset(loaded, train_set, settings.max_pixels), evaluation


def _dataset(loaded: LoadedRows, tokenized: TokenizedSet, max_pixels: int) -> datasets.Dataset:
    return image_conversations([loaded.rows[number - 1] for number in tokenized.numbers], max_pixels)


def _render(
    loaded: LoadedRows, index: int, processor: Any, template: str, max_pixels: int, answers_only: bool
) -> tuple[list[int], list[int]]:
    """Row ``index`` through the processor: its token ids and loss mask (1 where the token carries loss)."""
    example = as_example(loaded.rows[index], max_pixels)
    try:
        output = processor.apply_chat_template(
            [_with_images(example)],
            chat_template=template,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=answers_only,
            processor_kwargs={"add_special_tokens": False},
        )
    except Exception as exc:  # a template's raise_exception, a processor's refusal: name the row either way
        source, number = loaded.where(index)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{source} row {number}: cannot render it with the processor: {message}") from None
    ids = [int(token) for token in _first(output["input_ids"])]
    mask = [int(bit) for bit in _first(output["assistant_masks"])] if answers_only else [1] * len(ids)
    return ids, mask


def _with_images(example: dict[str, Any]) -> list[dict[str, Any]]:
    """The example's messages with each image part holding its image, as TRL's prepare_multimodal_messages fills
    them before the processor renders them."""
    from trl.data_utils import prepare_multimodal_messages

    return prepare_multimodal_messages(example["messages"], images=example["images"])


def _first(value: Any) -> list[Any]:
    """The first (only) sequence of a batched output, as a list."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    return value[0] if value and isinstance(value[0], list) else value


def _image_token_ids(processor: Any) -> set[int]:
    """The tokens an image becomes in the rendered row, any of which past max_length means its image is cut: the
    processor's image token, and the tokenizer's when it names another. Gemma 3's processor calls
    ``<start_of_image>`` (what the template writes) its image token and expands it into the tokenizer's
    ``<image_soft_token>`` tokens, whose count it checks: a cut among those fails in the collator."""
    tokenizer = processor.tokenizer
    found = {getattr(processor, "image_token_id", None), getattr(tokenizer, "image_token_id", None)}
    for owner in (processor, tokenizer):
        token = getattr(owner, "image_token", None)
        if isinstance(token, str) and token:
            found.add(tokenizer.convert_tokens_to_ids(token))
    return {token_id for token_id in found if isinstance(token_id, int) and token_id != tokenizer.unk_token_id}

"""Whether a run's data fits its method: the dataset check of a run, and the refusal of data in a format its method
does not train on (naming the methods that do)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, Problem, RunConfig, vision_problems
from engine.config.data import PREFERENCE_FORMAT, UNPAIRED_FORMAT
from engine.data.mixture import FORMAT_JOIN
from engine.data.template_guard import CHECK_BUDGET_S
from engine.data.vision_rows import VISION_FORMAT
from engine.training.methods import METHODS, Method, method_of
from engine.training.modality import TEXT, VISION, model_modality

if TYPE_CHECKING:
    from engine.data import DataReport, DatasetRows


def inspect_run_data(config: RunConfig, tokenizer: Any = None, template_budget_s: float = CHECK_BUDGET_S) -> DataReport:
    """The dataset check of a run: its rows (and tokens, given a tokenizer; engine.data.inspect_dataset), and
    that its method trains on their format: each dataset's, when data.path lists several, checked as soon as it is
    loaded. Raises DataError for the data, ConfigError for data of another method (field ``method``, or the
    dataset's ``data.path.N``)."""
    from engine.data import inspect_dataset

    method, train = method_of(config), config.train
    modality = model_modality(config.model.name_or_path, config.model.revision)

    def accept(dataset: DatasetRows) -> None:
        listed = dataset.label != "data.path"
        require_format(method, dataset.format, dataset.source, dataset.label if listed else "")
        require_modality(config, modality, dataset.format, dataset.source)

    if tokenizer is not None and modality == VISION:  # the tokenizer is the model's processor
        from engine.data.vision_sets import inspect_vision_dataset

        return inspect_vision_dataset(config, tokenizer, accept)
    return inspect_dataset(config.data, tokenizer, train.max_length, train.seed, template_budget_s, accept)


def require_modality(config: RunConfig, modality: str | None, fmt: str, source: str) -> None:
    """Refuse images for a text-only model, and data without images for a vision-language model, naming both."""
    model = config.model.name_or_path
    images = VISION_FORMAT in fmt.split(FORMAT_JOIN)
    if images and modality == TEXT:
        raise ConfigError(
            [Problem("model.name_or_path", MODALITY_MISFIT["images_to_text"].format(source=source, model=model))]
        )
    if images and (config.train.packing or config.train.padding_free == "on"):
        field = "train.packing" if config.train.packing else "train.padding_free"
        raise ConfigError([Problem(field, MODALITY_MISFIT["packed_images"])])
    if modality == VISION and (problems := vision_problems(config)):
        raise ConfigError(problems)
    if not images and modality == VISION:
        raise ConfigError(
            [Problem("data.path", MODALITY_MISFIT["text_to_vision"].format(source=source, model=model, format=fmt))]
        )


def require_format(method: Method, fmt: str, source: str, entry: str = "") -> None:
    """Refuse data whose format the method does not train on, naming what it takes. ``fmt`` may join the formats
    of a list of datasets ("alpaca+conversational": each must fit); ``entry`` names the one dataset of such a
    list that ``source`` is (``data.path.1``): the problem is then that field's."""
    misfit = next((part for part in fmt.split(FORMAT_JOIN) if part not in method.formats), None)
    if misfit is None:
        return
    takers = " or ".join(other.name for other in METHODS.values() if misfit in other.formats)
    if entry:
        advice = MISFIT_ADVICE["remove_or_set" if takers else "remove"]
    else:
        advice = MISFIT_ADVICE["set_method" if takers else "other_dataset"]
    what = FORMAT_WORDS.get(misfit, FORMAT_WORDS["other"]).format(format=misfit)
    formats = ", ".join(method.formats)
    message = FORMAT_MISFIT.format(
        source=source, what=what, method=method.name, formats=formats, advice=advice.format(methods=takers)
    )
    raise ConfigError([Problem(entry or "method", message)])


# The refusal's words, each part from one template (the studio says them again in the page's language).
FORMAT_MISFIT = "{source} is {what}, and {method} trains on {formats} data; {advice}"
MISFIT_ADVICE = {
    "set_method": "set method to {methods}",
    "other_dataset": "pick another dataset",
    "remove_or_set": "remove it from data.path, or set method to {methods}",
    "remove": "remove it from data.path",
}
MODALITY_MISFIT = {
    "images_to_text": "{source} is vision-language data (conversations with images), and {model} reads text only; "
    "pick a vision-language model (image-text-to-text, such as Qwen2-VL or LLaVA) or a dataset without images",
    "text_to_vision": "{model} is a vision-language model, and {source} has no images ({format} data); give it "
    "conversations with images, or pick a text model",
    "packed_images": "rows with images train in padded batches (TRL's collator renders them with their images); turn "
    "off train.packing and set train.padding_free to auto or off",
}
# How a format reads in the refusal.
FORMAT_WORDS = {
    VISION_FORMAT: "vision-language data (conversations with images)",
    PREFERENCE_FORMAT: "preference data (a chosen and a rejected answer per prompt)",
    UNPAIRED_FORMAT: "kto data (answers labelled desirable or not)",
    "prompt": "prompts only (no answers to learn from)",
    "other": "{format} data",
}

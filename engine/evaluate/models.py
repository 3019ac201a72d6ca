"""What an evaluation scores and with which models: the rows picked (the run's eval set, its training rows or a
file), what the tuned model is compared with (``starting_weights``: the run it started from, ``model.init_from``,
else its base model), and the models loaded one after the other (engine.evaluate.worker and .rewards share them).

**Baseline.** A run that started from another run is compared with the weights it started from, not the raw base:
that is what this run's training changed (an SFT start → DPO, which also takes that start as its reference). The
raw base is then scored too, as a third arm (``"raw_base"``), so what the start had already learnt shows beside
it. A start that is gone since leaves the raw base as the baseline, and a note says why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.data import LoadedRows, load_rows, resolve_chat_template
from engine.data.pipeline import select_rows
from engine.evaluate.evaluations import DATA_EVAL, DATA_TRAIN
from engine.runs.artifacts import ArtifactError, FinishedRun, TrainedWeights
from engine.runs.jobs import Progress

BASELINE_BASE = "base"  # a result's ``baseline`` when the tuned model is compared with the raw base model
RAW_BASE = "raw_base"  # the arm of the raw base model beside a starting run's (its key in a result and its rows)


def starting_weights(run: FinishedRun) -> tuple[str, TrainedWeights | None, str | None]:
    """What the run is compared with: ("base", None, None) for a run from its base model; for a run that started
    from another run, that run's name (and checkpoint) and weights; ("base", None, why) when that run is gone."""
    from engine.runs.lineage import resolve_init_from, source_label
    from engine.store.workspace import workspace_of

    value = run.config.model.init_from
    if not value:
        return BASELINE_BASE, None, None
    workspace = workspace_of(run.run_dir)
    try:
        source = resolve_init_from(value, workspace)
    except ArtifactError as exc:
        return BASELINE_BASE, None, f"the run it started from cannot be loaded ({exc}): compared with the base model"
    return source_label(value, workspace) or source.run.name, source.weights, None


def baseline_fields(baseline: str, note: str | None) -> dict[str, str]:
    """A result's ``baseline`` (and ``baseline_note`` when there is one)."""
    return {"baseline": baseline, **({"baseline_note": note} if note else {})}


def arm_count(start: TrainedWeights | None) -> int:
    """How many models ``load_models`` yields: the baseline and the tuned one, and the raw base beside a start."""
    return 3 if start is not None else 2


def pick_rows(run: FinishedRun, data: str, max_rows: int | None) -> tuple[LoadedRows, list[int], str]:
    """The chosen rows (by index) and the choice: the run's eval set, its training rows, or every row of a file;
    the first max_rows."""
    config = run.config
    if data in (DATA_EVAL, DATA_TRAIN):
        loaded, train_idx, eval_loaded, eval_idx = select_rows(config.data, config.train.seed)
        if data == DATA_EVAL:
            loaded, indices = eval_loaded, eval_idx  # check_data_choice made sure there is one
        else:
            indices = train_idx
        choice = data
    else:
        loaded = load_rows(config.data, data)
        indices, choice = list(range(len(loaded.rows))), "file"
    return loaded, indices[:max_rows] if max_rows else indices, choice


def load_eval_tokenizer(run: FinishedRun, weights: TrainedWeights) -> Any:
    """The tokenizer saved with the weights (it carries the chat template used in training), else the base's."""
    from transformers import AutoTokenizer

    from engine.training.modality import is_vision_model
    from engine.training.modeling import load_tokenizer
    from engine.training.vision import load_processor, text_tokenizer

    if (weights.path / "tokenizer_config.json").is_file():
        if is_vision_model(run.config):  # a processor beside its weights (loadable without torchvision)
            tokenizer = load_processor(str(weights.path), None, run.config.model.trust_remote_code)
        else:
            tokenizer = AutoTokenizer.from_pretrained(str(weights.path))
    else:
        tokenizer = load_tokenizer(run.config)
    text = text_tokenizer(tokenizer)
    if text.pad_token is None:
        text.pad_token = text.eos_token
    tokenizer.chat_template = resolve_chat_template(tokenizer, run.config.data.chat_template)
    return tokenizer


def placed(model: Any, config: Any, hardware: Any) -> Any:
    """A model loaded for scoring on the run's device: moved to the GPU when the run trains there (quantized
    weights are placed at load time)."""
    from engine.training.hardware import resolve_device

    if resolve_device(config, hardware) == "cuda" and config.quantization.mode == "none":
        return model.to("cuda")
    return model


def load_models(
    run: FinishedRun, weights: TrainedWeights, progress: Progress, start: TrainedWeights | None = None
) -> Iterator[tuple[str, Any]]:
    """Yield ("base", model) then ("tuned", model); one base load serves both for a LoRA run. With ``start`` (the
    weights the run started from, model.init_from) the "base" arm is those: a start adapter beside the tuned one on
    the same PeftModel (``set_adapter``), or merged into the base of a whole-model run; or a start model. The raw
    base model then comes first, as ("raw_base", model)."""
    from engine.training.builders import torch_dtype
    from engine.training.hardware import detect_hardware, resolve_device, resolve_dtype
    from engine.training.modality import model_kind
    from engine.training.modeling import load_model

    hardware = detect_hardware()
    device = resolve_device(run.config, hardware)

    def base_model(start_weights: Path | None = None) -> Any:
        return placed(load_model(run.config, hardware, weights=start_weights), run.config, hardware).eval()

    progress.update("loading the base model")
    if start is not None and not start.is_adapter:  # a whole start model: the raw base loads on its own first
        raw = base_model()
        yield RAW_BASE, raw
        del raw
        progress.update("loading the starting run's model")
    base = base_model(start.path if start and not start.is_adapter else None)
    if weights.is_adapter:
        from peft import PeftModel

        progress.update(f"loading the {weights.label}")
        tuned = PeftModel.from_pretrained(base, str(weights.path))
        tuned.eval()
        if start is not None:  # a LoRA run starts only from an adapter (engine.runs.lineage)
            with tuned.disable_adapter():
                yield RAW_BASE, tuned
            tuned.load_adapter(str(start.path), adapter_name="start")
            tuned.set_adapter("start")
            yield "base", tuned
            tuned.set_adapter("default")
        else:
            with tuned.disable_adapter():
                yield "base", tuned
        yield "tuned", tuned
        return
    if start is not None and start.is_adapter:
        from peft import PeftModel

        yield RAW_BASE, base
        base = PeftModel.from_pretrained(base, str(start.path)).merge_and_unload().eval()
    yield "base", base
    del base
    progress.update(f"loading the {weights.label}")
    dtype = torch_dtype(resolve_dtype(run.config.model.dtype, run.config, hardware))
    auto_class = model_kind(run.config).load_class()
    tuned = auto_class.from_pretrained(str(weights.path), dtype=dtype).to(device).eval()
    yield "tuned", tuned

"""Run lm-evaluation-harness tasks on a run's base model and its tuned model, inside ``python -m engine benchmark``.

Each task is run by ``lm_eval.simple_evaluate`` on an ``HFLM`` that wraps the model loaded here, once for the base
and once for the tuned model; the base's rows come from the workspace's cache when the same base, task and settings
were scored before (engine.evaluate.benchmarks.cache). The result goes to ``RUN_DIR/benchmarks/<id>.json``
(engine.evaluate.benchmarks.results).

**How the tuned model is evaluated.** A LoRA run's tuned model is its adapter on the base as the run trained it
(its dtype and quantization), unmerged, with the tokenizer saved beside the adapter (it carries the run's chat
template): the model Evaluate and Chat answer with, loaded once for both arms (the base arm is the same model with
the adapter switched off, engine.evaluate.models.load_models). A merged float32 copy, and lm-eval's own loading
(``peft=``), score the same on the demo run (tests/engine/evaluate/test_benchmark_tuned_run.py), so nothing is lost by
not merging; merging into a quantized base (QLoRA) would instead change the weights the adapter was trained on.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.evaluate.benchmarks import cache
from engine.evaluate.benchmarks.heldout import heldout_dir, write_heldout_task
from engine.evaluate.benchmarks.results import BenchmarkRequest, check_request, save_benchmark
from engine.evaluate.benchmarks.rows import merge_arms, to_rows
from engine.evaluate.benchmarks.tasks import (
    KIND_FILE,
    KIND_HELDOUT,
    KIND_LM_EVAL,
    TaskSpec,
    lm_eval_version,
    task_file_data,
)
from engine.evaluate.models import RAW_BASE, baseline_fields, load_eval_tokenizer, load_models, starting_weights
from engine.evaluate.result_files import result_header
from engine.runs.jobs import Progress
from engine.store.workspace import workspace_of

BOOTSTRAP_ITERS = 1000  # stderr of metrics that are not means (perplexity): lm-eval's 100,000 take minutes


@dataclass
class Prepared:
    """A task ready for lm-eval: what to hand it, where to run it from, and its identity for the base cache."""

    spec: TaskSpec
    lm_tasks: list[str]  # task names, or a task file's path
    identity: dict[str, Any]
    folder: Path | None = None  # a task file's folder: its relative data paths are read from there
    base_rows: list[dict[str, Any]] | None = None
    cache_path: Path | None = None
    from_cache: bool = False
    tuned_rows: list[dict[str, Any]] = field(default_factory=list)


def _prepare(spec: TaskSpec, run: Any, tokenizer: Any) -> Prepared:
    if spec.kind == KIND_HELDOUT:
        names, identity = write_heldout_task(run, tokenizer)
        return Prepared(spec, names, identity)
    if spec.kind == KIND_FILE:
        path = Path(spec.path or "")
        identity = {"name": spec.name, "file": cache.file_digest(path, *task_file_data(path))}
        return Prepared(spec, [str(path)], identity, folder=path.parent)
    return Prepared(spec, [spec.name], {"name": spec.name})


def language_model(model: Any, tokenizer: Any, batch_size: int, chat_prompts: bool, **options: Any) -> Any:
    """lm-eval's HFLM around a loaded model (or one HFLM loads: a name or folder, with its ``options``); with
    ``chat_prompts`` one that scores an answer after a rendered chat prompt as the model was trained on it.

    lm-eval moves a context's trailing whitespace into the continuation it scores (a word boundary in plain text);
    a chat template's generation prompt ends in whitespace the model reads there, never writes ("<|assistant|>\\n"),
    so the held-out log-likelihood would charge the model for that newline (on the demo run: perplexity 5e4 at 100 %
    exact match). The held-out task's context keeps it; lm-eval's and the user's tasks are scored as lm-eval does.
    """
    from lm_eval.models.huggingface import HFLM

    class ChatPromptLM(HFLM):
        def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
            whole, prompt = self.tok_encode(context + continuation), self.tok_encode(context)
            if whole[: len(prompt)] != prompt:  # the answer's first token merged with the prompt's end
                return super()._encode_pair(context, continuation)
            return prompt, whole[len(prompt) :]

    kind = ChatPromptLM if chat_prompts else HFLM
    return kind(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, **options)


def _evaluate(lm: Any, task: Prepared, manager: Any, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """One task on one model."""
    from lm_eval import simple_evaluate

    here = os.getcwd()
    try:
        if task.folder is not None:
            os.chdir(task.folder)
        output = simple_evaluate(
            lm,
            tasks=task.lm_tasks,
            task_manager=manager,
            limit=settings["limit"],
            num_fewshot=settings["num_fewshot"],
            # The held-out prompts are rendered through the run's template already (engine.evaluate.benchmarks.heldout).
            apply_chat_template=settings["chat_template"] and task.spec.kind != KIND_HELDOUT,
            bootstrap_iters=BOOTSTRAP_ITERS,
            log_samples=False,
        )
    finally:
        os.chdir(here)
    return to_rows(output or {})


def run_benchmark(run_dir: Path, request: BenchmarkRequest, progress: Progress | None = None) -> dict[str, Any]:
    """Benchmark a run's base and tuned model as ``request`` asks; save and return the result. Raises
    BenchmarkError / ArtifactError for a request that cannot run, before a model loads."""
    progress = progress or Progress(None)
    began = time.time()
    run, weights, specs = check_request(run_dir, request)
    logging.getLogger("lm_eval").setLevel(logging.WARNING)  # its per-task INFO lines would bury the progress lines
    # lm-eval bootstraps a stderr (perplexity's) in a pool of forked workers, which inherit the job's SIGTERM handler
    # (cancel): the pool's own SIGTERM at its end then raised Cancelled in a worker, and one left stuck hung the job.
    os.environ["DISABLE_MULTIPROC"] = "1"
    progress.update("preparing the tasks")
    from lm_eval.tasks import TaskManager

    tokenizer = load_eval_tokenizer(run, weights)
    prepared = [_prepare(spec, run, tokenizer) for spec in specs]
    has_heldout = any(spec.kind == KIND_HELDOUT for spec in specs)
    manager = TaskManager(
        include_path=str(heldout_dir(run.run_dir)) if has_heldout else None,
        include_defaults=any(spec.kind == KIND_LM_EVAL for spec in specs),  # lm-eval's own index takes 10-20 s
    )
    settings = {"limit": request.limit, "num_fewshot": request.num_fewshot, "chat_template": request.chat_template}
    workspace = workspace_of(run.run_dir) or run.run_dir.parent
    baseline, start, note = starting_weights(run)
    model = cache.model_identity(run, start)
    version = lm_eval_version() or "?"
    for task in prepared:
        hit = cache.read_cached(workspace, cache.cache_key(model, task.identity, settings, version))
        if hit is not None:
            task.base_rows, task.cache_path = hit
            task.from_cache = True
    total, done = len(prepared) + sum(not task.from_cache for task in prepared), 0
    batch_size = run.config.train.eval_batch_size
    for label, loaded in load_models(run, weights, progress, start):
        if label == RAW_BASE:
            continue  # a benchmark compares the tuned model with what it started from
        for task in prepared:
            if label == "base" and task.from_cache:
                continue
            progress.update(f"{label}: {task.spec.name}", done=done, total=total)
            lm = language_model(loaded, tokenizer, batch_size, task.spec.kind == KIND_HELDOUT)
            rows = _evaluate(lm, task, manager, settings)
            done += 1
            progress.update(done=done, total=total)
            if label == "base":
                key = cache.cache_key(model, task.identity, settings, version)
                task.base_rows, task.cache_path = rows, cache.write_cached(workspace, key, rows)
            else:
                task.tuned_rows = rows
        del loaded
    progress.update("saving the results")
    result = {
        **result_header(run.run_dir.name, weights.label, began),
        "tuned_as": "adapter" if weights.is_adapter else "model",
        **baseline_fields(baseline, note),
        "lm_eval_version": version,
        "settings": {**settings, "batch_size": batch_size},
        "tasks": [
            {
                "name": task.spec.name,
                "kind": task.spec.kind,
                "source": task.spec.path or task.spec.name,
                "base_from_cache": task.from_cache,
                "base_cache": str(task.cache_path),
                "rows": merge_arms(task.base_rows or [], task.tuned_rows),
            }
            for task in prepared
        ],
    }
    result["path"] = str(save_benchmark(run.run_dir, result))
    return result

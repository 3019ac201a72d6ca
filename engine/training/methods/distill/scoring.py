"""Evaluate's scoring of a distill run: how near the model came to its teacher on held-out prompts.

The teacher answers each prompt greedily (engine.evaluate.scoring.generate_completions, at most
``distill.max_completion_length`` tokens); its answers are the references of the "answers" scoring
(engine.evaluate.worker.score_answers): the loss and perplexity of the base and of the tuned model on the teacher's
answers, and how often each model's greedy answer is the teacher's, word for word. The result has the answers
scoring's shape, with ``"references": "teacher"`` saying where its references come from.
"""

from __future__ import annotations

from typing import Any

from engine.data import DataError
from engine.data.prompts import prompt_row
from engine.data.rows import LoadedRows
from engine.evaluate.models import pick_rows, placed
from engine.evaluate.scoring import generate_completions
from engine.evaluate.worker import eval_set_of, score_answers
from engine.runs.artifacts import FinishedRun, TrainedWeights
from engine.runs.jobs import Progress
from engine.training.methods.distill.trainer import load_teacher

REFERENCES = "teacher"


def score(
    run: FinishedRun, weights: TrainedWeights, tokenizer: Any, data: str, max_rows: int | None, progress: Progress
) -> dict[str, Any]:
    """Score the base and the tuned model against the teacher's answers to the prompts of ``data`` (eval, train or
    a file)."""
    loaded, indices, choice = pick_rows(run, data, max_rows)
    shaped = [prompt_row(loaded.rows[index], index + 1) for index in indices]
    prompts = [row["prompt"] for row in shaped if row is not None]
    if not prompts:
        raise DataError(f"{loaded.source} has no prompt (a user turn) for the teacher to answer")
    progress.update("the teacher: answering the prompts")
    answers = _teacher_answers(run, tokenizer, prompts)
    taught = LoadedRows(
        rows=[
            {"messages": [*prompt, {"role": "assistant", "content": answer}]}
            for prompt, answer in zip(prompts, answers, strict=True)
        ],
        format="conversational",
        source=loaded.source,
        columns=["messages"],
    )
    eval_set = eval_set_of(run, tokenizer, taught, list(range(len(prompts))), choice)
    return {**score_answers(run, weights, tokenizer, eval_set, None, progress), "references": REFERENCES}


def _teacher_answers(run: FinishedRun, tokenizer: Any, prompts: list[list[dict[str, str]]]) -> list[str]:
    """The teacher's greedy answers, loaded as in training (engine.training.methods.distill.trainer.load_teacher)
    and placed as Evaluate places the run's own models."""
    from engine.training.hardware import detect_hardware

    config, hardware = run.config, detect_hardware()
    teacher = placed(load_teacher(config, hardware), config, hardware)
    batch = config.train.eval_batch_size
    answers = generate_completions(teacher, tokenizer, prompts, config.distill.max_completion_length, batch)
    return [answer.text.strip() for answer in answers]

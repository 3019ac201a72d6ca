"""The training recipe, run inside the worker process: set up, train, save, clean up.

It reads ``run_dir/config.yaml`` and writes the rest of the run directory. The process that starts it (the
supervisor) captures its output into train.log and records its exit code.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import ConfigError, RunConfig, load_config
from engine.rundir import (
    ADAPTER_DIR,
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    MODEL_DIR,
    append_metrics,
    checkpoint_path,
    iter_metrics,
    update_status,
)
from engine.stopping import StopRequest

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class Rank:
    """This process's place in a (possibly single-process) distributed run."""

    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run directory."""
        return self.rank == 0


def current_rank() -> Rank:
    """Read torchrun's environment; a plain process is rank 0 of 1."""
    return Rank(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))


def _result_dir(run_dir: Path, config: RunConfig) -> Path:
    return run_dir / (ADAPTER_DIR if config.adapter.method == "lora" else MODEL_DIR)


def _resume_marker(run_dir: Path, step: int) -> set[tuple[str, int]]:
    """Append the resume marker; return the (event, step) pairs already logged so none is written twice."""
    logged = {(event.get("event", "train"), event.get("step", -1)) for event in iter_metrics(run_dir)}
    append_metrics(run_dir, [{"event": "resume", "step": step, "time": time.time()}])
    return logged


def _build_trainer(config: RunConfig, run_dir: Path, callback: Any) -> Any:
    """Load tokenizer, data and model, and wire them into TRL's SFTTrainer."""
    from transformers import PrinterCallback
    from trl import SFTTrainer

    from engine.builders import to_training_args
    from engine.data import prepare_datasets, resolve_chat_template
    from engine.hardware import detect_hardware, hardware_problems
    from engine.modeling import count_parameters, load_model, load_tokenizer, make_trainable

    hardware = detect_hardware()
    problems = hardware_problems(config, hardware)
    if problems:
        raise ConfigError(problems)
    tokenizer = load_tokenizer(config)
    # The template used for training is saved with the result, so chatting with it formats prompts the same way.
    tokenizer.chat_template = resolve_chat_template(tokenizer, config.data.chat_template)
    data = prepare_datasets(config, tokenizer)
    for warning in data.report.warnings:
        print(f"data warning: {warning}", flush=True)
    # Seed before the adapter is created: LoRA's initial weights come from the global generator.
    seed_everything(config)
    model = make_trainable(load_model(config, hardware), config, hardware)
    params = count_parameters(model)
    print(f"model: {params}", flush=True)
    if callback.is_main:
        update_status(
            run_dir,
            trainable_params=params.trainable,
            total_params=params.total,
            train_rows=data.report.num_rows,
        )
    trainer = SFTTrainer(
        model=model,
        args=to_training_args(config, run_dir / CHECKPOINTS_DIR, hardware),
        train_dataset=data.train,
        eval_dataset=data.eval,
        processing_class=tokenizer,
        callbacks=[callback],
    )
    # The callback prints one readable line per log; the stock printer would print each log dict again.
    trainer.remove_callback(PrinterCallback)
    return trainer


def seed_everything(config: RunConfig) -> None:
    """Seed Python, NumPy and torch (and make kernels deterministic when asked) so runs repeat exactly."""
    from transformers import enable_full_determinism, set_seed

    if config.train.full_determinism:
        enable_full_determinism(config.train.seed)
    else:
        set_seed(config.train.seed)


def _save_result(trainer: Any, run_dir: Path, config: RunConfig) -> Path:
    """Save the adapter (or model) and tokenizer in the usual peft / transformers layout."""
    target = _result_dir(run_dir, config)
    trainer.save_model(str(target))
    trainer.processing_class.save_pretrained(str(target))
    return target


def run(run_dir: Path, checkpoint_step: int | None = None, stop: StopRequest | None = None) -> int:
    """Train the run in ``run_dir`` (from a checkpoint when given); returns the process exit code.

    ``stop`` is the already installed signal handler when the caller installed it before importing this module.
    """
    from engine.callbacks import RunDirCallback

    if stop is None:
        stop = StopRequest()
        stop.install()
    _quiet_libraries()
    rank = current_rank()
    if rank.is_main:
        update_status(run_dir, state="starting", pid=os.getpid(), started_at=time.time(), error=None, exit_code=None)
    try:
        config = load_config(run_dir / CONFIG_FILE)
        logged = _resume_marker(run_dir, checkpoint_step) if checkpoint_step is not None and rank.is_main else set()
        callback = RunDirCallback(run_dir, stop, rank.is_main, already_logged=logged)
        trainer = _build_trainer(config, run_dir, callback)
        resume_from = str(checkpoint_path(run_dir, checkpoint_step)) if checkpoint_step is not None else None
        if stop.requested:  # stopped while loading: nothing trained, nothing to save
            return _stopped_before_training(run_dir, rank)
        trainer.train(resume_from_checkpoint=resume_from)
    except Exception as exc:  # noqa: BLE001 - any crash must end as a failed status with its reason
        if _is_input_error(exc):
            return _fail(run_dir, rank, str(exc), EXIT_BAD_INPUT)
        traceback.print_exc()
        return _fail(run_dir, rank, f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    return _finish(trainer, run_dir, config, callback, rank)


def _quiet_libraries() -> None:
    """Keep train.log readable: no progress bars from datasets, no deprecation notices from the libraries."""
    import warnings

    import datasets

    datasets.disable_progress_bars()
    warnings.filterwarnings("ignore", category=FutureWarning)


def _is_input_error(exc: Exception) -> bool:
    from engine.data import DataError

    return isinstance(exc, (ConfigError, DataError))


def _finish(trainer: Any, run_dir: Path, config: RunConfig, callback: Any, rank: Rank) -> int:
    """Decide the final state: failed on a bad loss, stopped on a signal, else save the result."""
    state = trainer.state
    if callback.bad_loss:
        return _fail(run_dir, rank, callback.bad_loss, EXIT_FAILED)
    if callback.stop.requested:
        if rank.is_main:
            update_status(run_dir, state="stopped", step=state.global_step, epoch=state.epoch, ended_at=time.time())
        print(f"stopped at step {state.global_step}; resume with: python -m engine resume {run_dir}", flush=True)
        return EXIT_OK
    target = _save_result(trainer, run_dir, config) if rank.is_main else None
    if rank.is_main:
        update_status(
            run_dir,
            state="completed",
            step=state.global_step,
            epoch=state.epoch,
            ended_at=time.time(),
            result=str(target),
        )
        print(f"completed: {state.global_step} steps; saved to {target}", flush=True)
    return EXIT_OK


def _stopped_before_training(run_dir: Path, rank: Rank) -> int:
    print("stopped before the first step; nothing was trained", flush=True)
    if rank.is_main:
        update_status(run_dir, state="stopped", ended_at=time.time())
    return EXIT_OK


def _fail(run_dir: Path, rank: Rank, message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    if rank.is_main:
        update_status(run_dir, state="failed", error=message, ended_at=time.time(), exit_code=code)
    return code

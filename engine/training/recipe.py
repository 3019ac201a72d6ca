"""The training recipe, run inside the worker process: set up, train, save, clean up.

It reads ``run_dir/config.yaml`` and writes the rest of the run directory. The process that starts it (the
supervisor) captures its output into train.log and records its exit code.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import ConfigError, RunConfig, load_config
from engine.store.disk import DISK_FULL_WORDS, disk_full_errno
from engine.store.rundir import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    append_metrics,
    checkpoint_path,
    checkpoint_steps,
    drop_partial_metrics_line,
    incomplete_checkpoints,
    iter_metrics,
    read_status,
    remove_checkpoint,
    reserve_space,
    result_dir,
    update_status,
)
from engine.store.workspace import workspace_of
from engine.training.methods import charted_keys
from engine.training.stopping import StopRequest

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


def _resume_marker(run_dir: Path, step: int) -> set[tuple[str, int]]:
    """Append the resume marker; return the (event, step) pairs already logged so none is written twice."""
    drop_partial_metrics_line(run_dir)
    logged = {(event.get("event", "train"), event.get("step", -1)) for event in iter_metrics(run_dir)}
    append_metrics(run_dir, [{"event": "resume", "step": step, "time": time.time()}])
    return logged


def _build_trainer(config: RunConfig, run_dir: Path, callback: Any) -> Any:
    """Load tokenizer, data and model, and hand them to the run's method for its TRL trainer."""
    from transformers import PrinterCallback

    from engine.data import resolve_chat_template
    from engine.runs.lineage import checked_source
    from engine.training.builders import to_early_stopping_callback, to_training_args
    from engine.training.controls import RequestsCallback
    from engine.training.hardware import detect_hardware, hardware_problems
    from engine.training.method_data import require_format
    from engine.training.methods import TrainerParts, method_of
    from engine.training.modeling import build_model, count_parameters, load_tokenizer, saved_modules_trainable
    from engine.training.trackers import use_trackio_dir

    method = method_of(config)
    hardware = detect_hardware()
    problems = hardware_problems(config, hardware)
    if problems:
        raise ConfigError(problems)
    # model.init_from was checked before launch; the source may have changed since (deleted, running again).
    source = checked_source(config, workspace_of(run_dir))
    if source is not None:
        print(f"starting from {source.plan(config)}", flush=True)
    cpu_share = _cpu_share(config, hardware)  # starts measuring the machine's load while the rest loads
    tokenizer = load_tokenizer(config)
    # The template used for training is saved with the result, so chatting with it formats prompts the same way.
    tokenizer.chat_template = resolve_chat_template(tokenizer, config.data.chat_template)
    data = method.trainer().prepare_data(config, tokenizer)
    require_format(method, data.report.format, data.report.source)
    for warning in data.report.warnings:
        print(f"data warning: {warning}", flush=True)
    # Seed before the adapter is created: LoRA's initial weights come from the global generator.
    seed_everything(config)
    model = build_model(config, hardware, source.weights if source is not None else None)
    params = count_parameters(model)
    print(f"model: {params}", flush=True)
    if callback.is_main:
        update_status(
            run_dir,
            trainable_params=params.trainable,
            total_params=params.total,
            train_rows=data.report.num_rows,
        )
    if callback.is_main:
        _print_path(config, hardware)
    use_trackio_dir(config, run_dir)  # before the Trainer's trackio callback imports trackio
    args = to_training_args(config, run_dir / CHECKPOINTS_DIR, hardware)
    # Save now and Pause after the run directory's callback (a step's log is written before the run waits there),
    # early stopping after both (an evaluation that ends a pause is judged once the pause is over).
    early = [early_stopping] if (early_stopping := to_early_stopping_callback(config)) else []
    callbacks = [callback, RequestsCallback(callback), *early, *cpu_share]
    trainer = method.trainer().build_trainer(TrainerParts(config, model, tokenizer, data, args, callbacks))
    saved_modules_trainable(trainer.model, config, hardware)
    # The callback prints one readable line per log; the stock printer would print each log dict again.
    trainer.remove_callback(PrinterCallback)
    return trainer


def _print_path(config: RunConfig, hardware: Any) -> None:
    """The run's path in train.log: device, weights and autocast, attention and sdpa's kernels, padding-free
    batches, Liger (and why), TF32, gradient checkpointing (engine.training.run_path)."""
    from engine.training.run_path import resolve_run_path

    print(f"path: {resolve_run_path(config, hardware).line()}", flush=True)


def _cpu_share(config: RunConfig, hardware: Any) -> list[Any]:
    """The callback that trains with the cores other programs leave free, where it applies (training.cpu_share)."""
    from engine.training.cpu_share import cpu_share_callback
    from engine.training.hardware import resolve_device

    share = cpu_share_callback(
        threads_pinned=config.launch.threads_per_process is not None,
        on_cpu=resolve_device(config, hardware) == "cpu",
        num_processes=config.launch.num_processes,
    )
    return [share] if share else []


def seed_everything(config: RunConfig) -> None:
    """Seed Python, NumPy and torch (and make kernels deterministic when asked) so runs repeat exactly."""
    from transformers import enable_full_determinism, set_seed

    if config.train.full_determinism:
        enable_full_determinism(config.train.seed)
    else:
        set_seed(config.train.seed)


def _save_result(trainer: Any, run_dir: Path, config: RunConfig) -> Path:
    """Save the adapter (or model) and tokenizer in the usual peft / transformers layout."""
    target = result_dir(run_dir, config.adapter.is_lora)
    trainer.save_model(str(target))
    trainer.processing_class.save_pretrained(str(target))
    return target


def run(run_dir: Path, checkpoint_step: int | None = None, stop: StopRequest | None = None) -> int:
    """Train the run in ``run_dir`` (from a checkpoint when given); returns the process exit code.

    ``stop`` is the already installed signal handler when the caller installed it before importing this module.
    """
    from engine.training.callbacks import RunDirCallback

    if stop is None:
        stop = StopRequest()
        stop.install()
    _quiet_libraries()
    rank = current_rank()
    if rank.is_main:
        _prepare_run_dir(run_dir)
        now = time.time()
        update_status(
            run_dir,
            state="starting",
            pid=os.getpid(),
            started_at=now,
            first_started_at=read_status(run_dir).first_started_at or now,
            error=None,
            exit_code=None,
            bad_loss_step=None,
            paused_at=None,  # a process killed while paused left it
            reason=None,
        )
    callback = None
    try:
        config = load_config(run_dir / CONFIG_FILE)
        logged = _resume_marker(run_dir, checkpoint_step) if checkpoint_step is not None and rank.is_main else set()
        callback = RunDirCallback(
            run_dir,
            stop,
            rank.is_main,
            already_logged=logged,
            start_step=checkpoint_step or 0,
            method_keys=charted_keys(config),
        )
        trainer = _build_trainer(config, run_dir, callback)
        resume_from = str(checkpoint_path(run_dir, checkpoint_step)) if checkpoint_step is not None else None
        if stop.requested:  # stopped while loading: nothing trained, nothing to save
            return _stopped_before_training(run_dir, rank)
        trainer.train(resume_from_checkpoint=resume_from)
        return _finish(trainer, run_dir, config, callback, rank)
    except Exception as exc:  # noqa: BLE001 - any crash must end as a failed status with its reason
        if _is_input_error(exc):
            return _fail(run_dir, rank, str(exc), EXIT_BAD_INPUT)
        with contextlib.suppress(OSError):  # the log may sit on the very disk that is full
            traceback.print_exc()
        if rank.is_main:
            _discard_incomplete_checkpoints(run_dir)  # nothing may resume from them; on a full disk, space back
        saving = callback.saving if callback else None
        return _fail(run_dir, rank, _failure_message(exc, run_dir, saving), EXIT_FAILED)


def _prepare_run_dir(run_dir: Path) -> None:
    """Before training: drop checkpoints an earlier process left half-written and set aside room for the
    final status (rank 0 only; no other process of this run writes yet)."""
    _discard_incomplete_checkpoints(run_dir)
    reserve_space(run_dir)


def _discard_incomplete_checkpoints(run_dir: Path) -> None:
    """Remove checkpoint directories cut short by a crash or a full disk.

    checkpoint_steps never lists them, but left in place they hold disk space, and Trainer's rotation (which
    sorts checkpoints by time) could keep one of them and delete a good one instead.
    """
    for path in incomplete_checkpoints(run_dir):
        print(f"removing the incomplete checkpoint {path.name}", flush=True)
        remove_checkpoint(path)


def _failure_message(exc: Exception, run_dir: Path, saving: str | None) -> str:
    """The status error of a crash: plain words for a full disk, else the exception itself."""
    code = disk_full_errno(exc, run_dir, saving is not None)
    if code is None:
        return f"{type(exc).__name__}: {exc}"
    where = f"while saving {saving}" if saving else "while writing the run directory"
    steps = checkpoint_steps(run_dir)
    then = f"resume from checkpoint {steps[-1]}" if steps else "start the run again"
    return f"the disk is full: {DISK_FULL_WORDS[code]} {where} in {run_dir}. Free some space, then {then}."


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
    """Decide the final state: failed on a bad loss, stopped on a signal, else save the result.

    A stop that arrives once every step is done (during the last save) completes the run: saving the result
    takes a moment, and a run stopped at its last step would leave nothing to resume.
    """
    state = trainer.state
    if callback.bad_loss:
        return _fail_on_bad_loss(run_dir, rank, callback)
    reason = early_stop_reason(trainer, config)  # it has trained as far as it should: it completes
    if reason is None and callback.stop.requested and state.global_step < state.max_steps:
        if rank.is_main:
            update_status(run_dir, state="stopped", step=state.global_step, epoch=state.epoch, ended_at=time.time())
        print(f"stopped at step {state.global_step}; resume with: python -m engine resume {run_dir}", flush=True)
        return EXIT_OK
    callback.saving = "the result"
    target = _save_result(trainer, run_dir, config) if rank.is_main else None
    callback.saving = None
    if rank.is_main:
        update_status(
            run_dir,
            state="completed",
            step=state.global_step,
            epoch=state.epoch,
            ended_at=time.time(),
            result=str(target),
            reason=reason,
        )
        print(f"completed: {state.global_step} steps; saved to {target}", flush=True)
    return EXIT_OK


def early_stop_reason(trainer: Any, config: RunConfig) -> str | None:
    """ "early stopped at step N (eval_loss did not improve for K evaluations)" when transformers'
    EarlyStoppingCallback ended the training before its last step, else None.

    The callback is looked up in the trainer: a resume replaces it by one restored from the checkpoint.
    """
    from transformers import EarlyStoppingCallback

    state = trainer.state
    found = [c for c in trainer.callback_handler.callbacks if isinstance(c, EarlyStoppingCallback)]
    if not found or state.global_step >= state.max_steps:
        return None
    misses = found[0].early_stopping_patience_counter
    if misses < found[0].early_stopping_patience:
        return None
    reason = (
        f"early stopped at step {state.global_step} ({config.train.early_stopping.metric} did not improve for "
        f"{misses} evaluation{'s' if misses != 1 else ''})"
    )
    print(f"{reason}; the result is the best checkpoint, {state.best_model_checkpoint}", flush=True)
    return reason


def _fail_on_bad_loss(run_dir: Path, rank: Rank, callback: Any) -> int:
    """End a run whose loss went NaN / infinite: keep the checkpoints from before it, drop the later ones.

    A checkpoint saved after the last finite logged loss may already hold NaN weights (with logging_steps > 1
    the NaN shows only at the next log), so those are removed. Resuming is refused (engine.runs.resume): it
    would replay the same data with the same optimizer state and learning rate, and fail the same way.
    """
    good = callback.last_finite_step
    if rank.is_main:
        for step in checkpoint_steps(run_dir):
            if step > good:
                print(f"removing checkpoint {step}: it may hold weights from after the loss went bad", flush=True)
                remove_checkpoint(checkpoint_path(run_dir, step))
    kept = checkpoint_steps(run_dir)
    keeping = f"checkpoints up to step {kept[-1]} are kept" if kept else "no checkpoint was saved before it"
    message = (
        f"{callback.bad_loss}. The run cannot be resumed (it would repeat the same steps); {keeping}. "
        "Start a new run with a lower learning rate."
    )
    if rank.is_main:
        update_status(run_dir, bad_loss_step=callback.bad_loss_step)
    return _fail(run_dir, rank, message, EXIT_FAILED)


def _stopped_before_training(run_dir: Path, rank: Rank) -> int:
    print("stopped before the first step; nothing was trained", flush=True)
    if rank.is_main:
        update_status(run_dir, state="stopped", ended_at=time.time())
    return EXIT_OK


def _fail(run_dir: Path, rank: Rank, message: str, code: int) -> int:
    with contextlib.suppress(OSError):  # a full disk may refuse the log line; the status still says why
        print(f"error: {message}", file=sys.stderr, flush=True)
    if rank.is_main:
        update_status(run_dir, state="failed", error=message, ended_at=time.time(), exit_code=code)
    return code

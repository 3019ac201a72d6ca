"""TrainerCallbacks that write the run directory: metrics.jsonl, status.json, a line per log in train.log,
a graceful stop on SIGTERM / SIGINT, and a stop on a NaN or infinite loss (Save now and Pause: controls.py).

Only rank 0 writes files; every rank watches for the stop signal so they all stop at the same step.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from engine.store.rundir import append_metrics, update_status
from engine.training.stopping import StopRequest


def memory_mb() -> float:
    """Memory in use by this process in MiB: CUDA memory on a GPU, resident memory otherwise."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    try:
        with open("/proc/self/statm") as handle:
            resident_pages = int(handle.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):  # no /proc (macOS): the peak resident size is the best there is
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _is_bad_number(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


class RunDirCallback(TrainerCallback):
    """Streams progress into the run directory and turns stop signals and NaN losses into clean stops."""

    def __init__(
        self,
        run_dir: Path,
        stop: StopRequest,
        is_main: bool,
        already_logged: set[tuple[str, int]] | None = None,
        status_interval_s: float = 0.25,
        start_step: int = 0,
        method_keys: list[str] | None = None,
    ):
        self.run_dir = run_dir
        self.stop = stop
        self.is_main = is_main
        # (event, step) pairs a resumed run already has in metrics.jsonl: never written twice.
        self.already_logged = already_logged or set()
        self.status_interval_s = status_interval_s
        # The method's own metrics (GRPO's reward, DPO's margins): its progress lines show them before the loss,
        # which GRPO logs as 0 by design (engine.training.methods.charted_keys).
        self.method_keys = method_keys or []
        self.bad_loss: str | None = None
        self.bad_loss_step: int | None = None
        # The last step whose logged loss was finite (a resumed run starts from a good checkpoint).
        self.last_finite_step = start_step
        # What is being saved right now ("checkpoint 6", "the result"), for the message if saving fails.
        self.saving: str | None = None
        self._last_status = 0.0
        self._last_log_time = time.time()
        self._last_tokens = 0

    def write_status(self, progress: Any, force: bool = False, **changes: Any) -> None:
        """Write step, max_steps and epoch from the trainer state (throttled unless forced)."""
        now = time.time()
        if self.is_main and (force or now - self._last_status >= self.status_interval_s):
            self._last_status = now
            step, max_steps, epoch = progress.global_step, progress.max_steps, progress.epoch
            update_status(self.run_dir, step=step, max_steps=max_steps, epoch=epoch, **changes)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._last_log_time = time.time()
        self._last_tokens = state.num_input_tokens_seen
        self.write_status(state, force=True, state="running")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.stop.agreed() and not control.should_training_stop:
            control.should_save = True
            control.should_training_stop = True
            print(
                f"{self.stop.signal_name}: saving a checkpoint at step {state.global_step} and stopping",
                flush=True,
            )
            self.write_status(state, force=True, state="stopping", paused_at=None)
        else:
            self.write_status(state)
        # Trainer logs, evaluates, then saves; a save announced here starts after any evaluation (on_evaluate).
        self._expect_save(state, control, evaluating=control.should_evaluate)

    def _expect_save(self, state: Any, control: Any, evaluating: bool = False) -> None:
        self.saving = f"checkpoint {state.global_step}" if control.should_save and not evaluating else None

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.restart_throughput_clock(state)
        self._expect_save(state, control)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.saving = None
        self.restart_throughput_clock(state)

    def restart_throughput_clock(self, state: Any) -> None:
        """Evaluation and saving are not training: tokens/s of the next log counts from here."""
        self._last_log_time = time.time()
        self._last_tokens = state.num_input_tokens_seen

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        logs = dict(logs or {})
        self._watch_loss(state, control, logs)
        if not self.is_main:
            return
        event = self._event(state, logs)
        key = (event["event"], state.global_step)
        if key in self.already_logged:
            return
        self.already_logged.add(key)
        append_metrics(self.run_dir, [event])
        print(_log_line(event, state.max_steps, self.method_keys), flush=True)

    def _watch_loss(self, state: Any, control: Any, logs: dict[str, Any]) -> None:
        """Stop on a NaN / infinite loss or gradient norm, without saving the weights it has spoilt."""
        for key, label in (("loss", "the loss"), ("grad_norm", "the gradient norm")):
            # A NaN can hide in the gradient norm while the reported loss still looks like a number.
            if _is_bad_number(logs.get(key)) and not self.bad_loss:
                self.bad_loss = f"{label} became {logs[key]} at step {state.global_step}; training stopped"
                self.bad_loss_step = state.global_step
                control.should_training_stop = True
                control.should_save = False  # Trainer logs before it saves: this step's checkpoint is skipped
                self.saving = None
        if "loss" in logs and not self.bad_loss:
            self.last_finite_step = state.global_step

    def _event(self, state: Any, logs: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        if "train_loss" in logs:
            kind = "summary"  # Trainer's closing log: mean loss and runtime of this process's training
        elif any(key.startswith("eval_") for key in logs):
            kind = "eval"
        else:
            kind = "train"
        event: dict[str, Any] = {"event": kind, "step": state.global_step, "epoch": state.epoch, "time": now}
        event.update({key: value for key, value in logs.items() if key != "epoch"})
        if kind == "train":
            tokens = state.num_input_tokens_seen
            elapsed = max(now - self._last_log_time, 1e-9)
            event["tokens_per_second"] = (tokens - self._last_tokens) / elapsed
            event["memory_mb"] = memory_mb()
            self._last_log_time, self._last_tokens = now, tokens
        return event


_SHOWN = ("loss", "eval_loss", "learning_rate", "grad_norm", "tokens_per_second")


def _log_line(event: dict[str, Any], max_steps: int, method_keys: list[str]) -> str:
    """One readable train.log line for a metrics event: the method's metrics (``eval_``-prefixed in an eval
    event) first, then what every method logs."""
    prefix = "eval_" if event["event"] == "eval" else ""
    values = [(key, event.get(prefix + key)) for key in method_keys] + [(key, event.get(key)) for key in _SHOWN]
    parts = [f"{event['event']} step {event['step']}/{max_steps}", f"epoch {event['epoch']:.2f}"]
    parts += [f"{key} {value:.4g}" for key, value in values if _is_number(value)]
    return " | ".join(parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

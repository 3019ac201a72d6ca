"""Demo mode: the rules of a public studio (a Hugging Face Space) where strangers share one small machine.

``DemoPolicy`` is the one object that decides them; the studio keeps it in ``StudioContext.policy`` and every
handler asks it. With ``enabled`` false (the default) nothing changes. With it on, visitors train only the
bundled demo model, for a capped number of steps, on the bundled datasets or a file they upload; they never
name a path on the server, never push to the hub, and see only their own runs. A visitor is a token the server
minted and signed (studio.demo.identity), kept in their browser (``gr.BrowserState``) across refreshes; a run
records its owner as a digest of that token in status.json. ``bound_to(workspace)`` gives the policy its signing
key and its limiter of new visitors per client address; a policy without them knows no visitor.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

from engine.api import (
    BUNDLED_MODELS,
    METHODS,
    PathNotAllowed,
    Problem,
    RunConfig,
    confine,
    find_local_path,
    method_of,
    model_source_fields,
    run_source_fields,
    visitor_datasets_dir,
    visitor_exports_dir,
)
from studio.demo.budget import AddressBudget
from studio.demo.identity import mint_token, verify_token, visitor_key
from studio.demo.ownership import owner_tag
from studio.demo.shown import server_roots, shown_value
from studio.form.schema import FieldSpec, leaf_specs
from studio.form.values import to_widget
from studio.form.yaml_lists import dataset_paths
from studio.i18n.catalog import SOURCE, english, key, text
from studio.path_guard import BUNDLED_DATASETS, named_paths

DEFAULT_DATA = RunConfig().data.path  # the engine's default: a bundled set
VISITOR_STORAGE_KEY = "tuning-studio-visitor"
MB = 1024 * 1024
DEMO_UPLOAD_MB = 20.0  # the demo sets are a few hundred kB; a visitor's own set of a few thousand rows fits
STUDIO_UPLOAD_MB = 2048.0  # one's own studio: large datasets are fine, a runaway upload is not
# Fields a visitor cannot change, with the only value they may hold.
LOCKED: dict[str, Any] = {
    "model.revision": None,
    "model.trust_remote_code": False,
    "quantization.mode": "none",
    "launch.num_processes": 1,
    "launch.devices": None,  # any free GPU: the visitors' runs share the machine's devices through the queue
    # No tracker: a Space's own WANDB_API_KEY or HF_TOKEN must not log strangers' runs, nor trackio fill its disk.
    "train.report_to": [],
    "train.trackio_project": None,
    "train.trackio_space": None,
}
# Fields a visitor picks among a few values, the first being what a form that names another is set back to: the
# bundled models (the text demo and the vision-language demo), each small enough for a shared CPU, in every field
# that names a model (the base, distill's teacher: none, unless the visitor picks one).
PICKED: dict[str, tuple[Any, ...]] = {
    path: (None, *BUNDLED_MODELS) if attrgetter(path)(RunConfig()) is None else BUNDLED_MODELS
    for path in model_source_fields()
}
# Picked fields that may name a run as well: a visitor's own (by id) is taken there beside the bundled models.
RUN_PICKED = tuple(path for path in PICKED if path in run_source_fields())
# The dataset fields a visitor may point only at their own uploads or the bundled sets.
VISITOR_DATA_FIELDS = ("data.path", "data.eval_path")
# The demo's refusals, by key (studio.i18n: said in the visitor's language); the constants hold their English.
DATA_REFUSED = key("demo.refusal.data")
# Visitors share the workspace: a run starts from the base model or from one of the visitor's own runs.
INIT_FROM_REFUSED = key("demo.refusal.init_from")
# Strangers never run code on the server: only the built-in rewards.
CUSTOM_REWARD_REFUSED = key("demo.refusal.custom_reward")
# A sweep starts run after run for as long as it has trials: on a shared machine one visitor would hold it for all.
SWEEPS_OFF = key("demo.sweeps_off")
DATA_REFUSAL, INIT_FROM_REFUSAL, CUSTOM_REWARD_REFUSAL, SWEEPS_REFUSAL = (
    text(name) for name in (DATA_REFUSED, INIT_FROM_REFUSED, CUSTOM_REWARD_REFUSED, SWEEPS_OFF)
)
# Why a field holds the value it does in the demo, and the notes its help gets.
LOCKED_FIELD, LOCKED_EMPTY, LOCKED_NONE = key("demo.locked"), key("demo.locked.empty"), key("demo.locked.none")
PICKED_FIELD, PICKED_OR_RUN = key("demo.picked"), key("demo.picked.or_run")
STEPS_CAP, STEPS_EPOCHS, STEPS_ASKED, CAPPED = (
    key(f"demo.{name}") for name in ("steps_cap", "steps_cap.epochs", "steps_cap.asked", "capped")
)
HELP_FIXED, HELP_PICKED, HELP_PICKED_OR_RUN, HELP_INIT_FROM, HELP_STEPS, HELP_CAP, HELP_JOINED = (
    key(f"demo.help.{name}") for name in ("fixed", "picked", "picked.or_run", "init_from", "max_steps", "cap", "joined")
)
T = TypeVar("T")


@dataclass(frozen=True)
class DemoPolicy:
    """What visitors of a public studio may do. ``enabled`` false: no limits (a studio of one's own)."""

    enabled: bool = False
    max_steps: int = 900  # the GRPO demo preset's run, about 165 s on 2 CPU cores (the SFT demo: 600, 80 s)
    max_minutes: float = 15.0  # wall time of one run, so one visitor cannot hold the CPU for long
    max_batch_size: int = 64
    max_length: int = 1024  # the default: the demo sets are short rows anyway
    max_accumulation: int = 8
    max_checkpoints: int = 3
    # The limits a method's demo_caps name (engine.training.methods.base.Method): max_<limit>.
    max_generations: int = 8  # answers sampled per prompt (GRPO)
    max_completion_tokens: int = 128  # the longest sampled answer (GRPO)
    max_upload_mb: float | None = None  # one uploaded file; None: DEMO_UPLOAD_MB, or STUDIO_UPLOAD_MB outside a demo
    visitor_quota_mb: float = 200.0  # a visitor's uploads, run directories and export together
    # Free space the workspace's disk keeps for the runs and jobs going on: an upload, Start, Resume or Export that
    # would leave less is refused, whoever's quota it fits in.
    min_free_disk_mb: float = 1024.0
    # A visitor whose runs, uploads and export all stood unchanged this long loses them (studio.demo.retention).
    keep_days: float = 7.0
    sent_mb_per_hour: float = 400.0  # request bodies (uploads above all) from one client address in any hour
    max_queued_runs: int = 8  # every visitor's queued runs together: a bound on what many tokens can do
    # Evaluations, benchmarks and exports of every visitor at once (each a process of its own beside the training
    # run, about 0.5 GB); a visitor has one at a time.
    max_jobs: int = 2
    max_job_minutes: float = 10.0  # one of them (the demo's evaluations take seconds): a visitor cannot hold a slot
    # Chat: each visitor's run model in a worker of its own, each bundled model in one the visitors share; this many
    # workers at once (with the demo model about 20 MB each forked from the warm fork server, 0.35 GB started cold,
    # benchmarks/demo_chat_visitors.py). One unused this long gives its place to another Load, and goes within a
    # minute anyway.
    max_chat_models: int = 3
    chat_idle_minutes: float = 10.0
    new_visitors_per_window: int = 10  # new visitor tokens per client address ...
    new_visitor_window_minutes: float = 10.0  # ... in any window this long
    proxy_hops: int = 0  # trusted proxies in front of the studio (1 on a Hugging Face Space)
    key: bytes = field(default=b"", repr=False, compare=False)  # signs visitor tokens; set by bound_to
    limiter: AddressBudget | None = field(default=None, repr=False, compare=False)

    def with_limits(self, items: Iterable[str]) -> DemoPolicy:
        """This policy with the ``NAME=VALUE`` limits of ``items`` set (``limit_kinds()``; a later one of the same
        name wins); ValueError names the item at fault and why."""
        changes: dict[str, float] = {}
        kinds = limit_kinds()
        for item in items:
            name, sep, value = (part.strip() for part in item.partition("="))
            if not sep or name not in kinds:
                raise ValueError(f"{item.strip()!r}: expected NAME=VALUE, NAME one of {', '.join(kinds)}")
            kind = kinds[name]
            try:
                number = kind(value)
            except ValueError:
                words = "a whole number" if kind is int else "a number"
                raise ValueError(f"{name}: {value!r} is not {words}") from None
            if not math.isfinite(number):
                raise ValueError(f"{name}: {value!r} is not a finite number")
            if number < 0 or (number == 0 and name not in MAY_BE_ZERO):
                raise ValueError(f"{name}: {value!r} must be {'0 or more' if name in MAY_BE_ZERO else 'above 0'}")
            changes[name] = number
        return dataclasses.replace(self, **changes)

    def bound_to(self, workspace: Path) -> DemoPolicy:
        """This policy with the workspace's signing key and a fresh limiter of new visitors (demo mode only)."""
        if not self.enabled:
            return self
        limiter = AddressBudget(self.new_visitors_per_window, self.new_visitor_window_minutes * 60)
        return dataclasses.replace(self, key=visitor_key(workspace), limiter=limiter)

    def visitor(self, token: object) -> str | None:
        """The visitor a token from the browser names, when the server signed it; None otherwise (and always
        outside demo mode, where nobody in particular is looking)."""
        return verify_token(self.key, token) if self.enabled else None

    def new_visitor(self, client: str) -> str | None:
        """A new visitor token for a page from ``client`` (an address); None when that address has had its
        share of new tokens for now (see ``new_visitor_wait``)."""
        if not self.enabled or not self.key or (self.limiter and not self.limiter.take(client)):
            return None
        return mint_token(self.key)

    def new_visitor_wait(self, client: str) -> float:
        """Seconds until ``client`` may get a new visitor token again."""
        return self.limiter.retry_in(client) if self.limiter else 0.0

    @property
    def storage_secret(self) -> str:
        """The secret Gradio's BrowserState encrypts with. Gradio publishes it in the page config, so it is a
        stable value derived one-way from the key (a restart keeps what browsers stored), not a protection."""
        return hashlib.sha256(b"browser-storage:" + self.key).hexdigest()[:32]

    @property
    def upload_limit_mb(self) -> float:
        """The largest file a page may upload, in MB (Gradio refuses a bigger one before it is stored)."""
        if self.max_upload_mb is not None:
            return self.max_upload_mb
        return DEMO_UPLOAD_MB if self.enabled else STUDIO_UPLOAD_MB

    @property
    def time_limit_s(self) -> float:
        """A run's time limit in seconds."""
        return self.max_minutes * 60

    @property
    def job_time_limit_s(self) -> float | None:
        """An evaluation's, benchmark's or export's time limit in seconds (None outside demo mode)."""
        return self.max_job_minutes * 60 if self.enabled else None

    def caps(self) -> dict[str, int]:
        """Upper bounds of numeric fields (memory and CPU time stay small on a shared machine)."""
        return {
            "train.max_steps": self.max_steps,
            "train.per_device_batch_size": self.max_batch_size,
            "train.eval_batch_size": self.max_batch_size,
            "train.max_length": self.max_length,
            "train.gradient_accumulation_steps": self.max_accumulation,
            "train.save_total_limit": self.max_checkpoints,
            **{
                f"{method.name}.{field}": getattr(self, f"max_{limit}")
                for method in METHODS.values()
                for field, limit in method.demo_caps.items()
            },
        }

    def problems(
        self, config: RunConfig, uploads: Path | None = None, own_runs: Collection[str] = (), lang: str = SOURCE
    ) -> list[Problem]:
        """Why the demo refuses ``config`` (one Problem per field at fault, said in ``lang``; [] when it is fine or
        not a demo).

        ``uploads`` is the visitor's upload folder: data may come from there or from the bundled sets.
        ``own_runs``: the ids of the visitor's runs that the config names, which a run may use (model.init_from,
        and a picked field that names a run too: distill's teacher).
        """
        if not self.enabled:
            return []
        found = [
            Problem(path, _locked_message(path, lang)) for path, value in LOCKED.items() if _get(config, path) != value
        ]
        found += [
            Problem(path, text(_picked_words(path), lang, values=", ".join(str(value) for value in values if value)))
            for path, values in PICKED.items()
            if _get(config, path) not in values and not (path in RUN_PICKED and _get(config, path) in own_runs)
        ]
        found += [Problem(path, message) for path, message in self._cap_messages(config, lang).items()]
        found += [
            Problem(f"{config.method}.rewards.{number}", text(CUSTOM_REWARD_REFUSED, lang))
            for number, reward in enumerate(method_of(config).rewards(config))
            if reward.kind == "custom"
        ]
        if config.model.init_from and config.model.init_from not in own_runs:
            found.append(Problem("model.init_from", text(INIT_FROM_REFUSED, lang)))
        # Each dataset of a list in data.path is checked on its own (data.path.1).
        found += [
            Problem(field, text(DATA_REFUSED, lang))
            for field, value in named_paths(config, VISITOR_DATA_FIELDS)
            if not data_allowed(value, uploads)
        ]
        return found

    def _cap_messages(self, config: RunConfig, lang: str = SOURCE) -> dict[str, str]:
        """path -> message (in ``lang``) for each number above its cap (and for epoch-based or unlimited
        settings)."""
        steps = config.train.max_steps
        found = {}
        if not 1 <= steps <= self.max_steps:
            detail = text(STEPS_EPOCHS, lang) if steps < 1 else text(STEPS_ASKED, lang, steps=steps)
            found["train.max_steps"] = text(STEPS_CAP, lang, cap=self.max_steps, detail=detail)
        for path, cap in self.caps().items():
            value = _get(config, path)
            if path != "train.max_steps" and (value is None or value > cap):
                found[path] = text(CAPPED, lang, cap=cap)
        return found

    def restrict_values(
        self, values: Mapping[str, Any], uploads: Path | None, owns_run: Callable[[str], bool] = lambda _: False
    ) -> tuple[dict[str, Any], list[str]]:
        """Widget values with the locked fields forced and disallowed data paths reset; plus what was changed.
        ``owns_run``: whether a run id is one of the visitor's own runs, which a field that names a run keeps."""
        values = dict(values)
        if not self.enabled:
            return values, []
        specs = {spec.path: spec for spec in leaf_specs()}
        changed = []
        wanted = {  # a picked field's value not among its choices is set back to the first
            path: choices[0]
            for path, choices in PICKED.items()
            if values.get(path) not in [to_widget(specs[path], choice) for choice in choices]
            and not (path in RUN_PICKED and _own_run_id(values.get(path), owns_run))
        }
        wanted.update({**LOCKED, "data.path": DEFAULT_DATA, "data.eval_path": None})
        for path, value in wanted.items():
            current = values.get(path)
            keep = path in VISITOR_DATA_FIELDS and widget_data_allowed(path, current, uploads)
            if not keep and current != to_widget(specs[path], value):
                values[path] = to_widget(specs[path], value)
                changed.append(path)
        return values, changed

    @property
    def sweeps_refusal(self) -> str | None:
        """Why this studio starts, stops and continues no sweeps (SWEEPS_REFUSAL in demo mode); None when it may."""
        return SWEEPS_REFUSAL if self.enabled else None

    def sweeps_refusal_in(self, lang: str) -> str | None:
        """``sweeps_refusal`` in ``lang``."""
        return text(SWEEPS_OFF, lang) if self.enabled else None

    def help_for(self, spec: FieldSpec, lang: str = SOURCE) -> str:
        """The help text of a field in the demo (what the limit is), or the field's own help; in ``lang``."""
        own = _field_help(spec, lang)
        if not self.enabled:
            return own
        if spec.path in LOCKED:
            note = text(HELP_FIXED, lang)
        elif spec.path in PICKED:
            note = text(HELP_PICKED_OR_RUN if spec.path in RUN_PICKED else HELP_PICKED, lang)
        elif spec.path == "model.init_from":
            note = text(HELP_INIT_FROM, lang)
        elif spec.path == "train.max_steps":
            return text(HELP_STEPS, lang, cap=self.max_steps)
        elif spec.path in self.caps():
            note = text(HELP_CAP, lang, cap=self.caps()[spec.path])
        else:
            return own
        return text(HELP_JOINED, lang, help=own, note=note) if own else note

    def has_own_help(self, spec: FieldSpec) -> bool:
        """Whether the demo gives ``spec`` a help text of its own (``help_for`` differs from the field's help)."""
        return self.help_for(spec) != spec.help

    def shown(self, value: T, workspace: Path | None) -> T:
        """``value`` as a page may show it: in demo mode the server paths in its text (a string, or the strings in
        lists, tuples and dict values) read as the names the visitor knows (studio.demo.shown: ``mine.jsonl``,
        ``workspace/runs/...``); outside demo mode unchanged, since whoever runs their own studio wants full paths."""
        return shown_value(value, server_roots(workspace)) if self.enabled else value


NORMAL = DemoPolicy()


def _get(config: RunConfig, path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _picked_words(path: str) -> str:
    """The refusal of a picked field's value: the bundled models, or for a field that names a run too, those or
    the visitor's own runs."""
    return PICKED_OR_RUN if path in RUN_PICKED else PICKED_FIELD


def _own_run_id(value: Any, owns_run: Callable[[str], bool]) -> bool:
    """Whether a widget's value is the id (not a path) of one of the visitor's runs."""
    return isinstance(value, str) and bool(value) and Path(value).name == value and owns_run(value)


def _locked_message(path: str, lang: str = SOURCE) -> str:
    value = LOCKED[path]
    shown = text(LOCKED_EMPTY, lang) if value is None else text(LOCKED_NONE, lang) if value == [] else f"{value}"
    return text(LOCKED_FIELD, lang, value=shown)


# The policy's numbers a host sets (launch.py --demo-limit / STUDIO_DEMO_LIMITS): all but the upload cap, which has
# a flag of its own, and the proxy hops, which follow from where the studio runs.
NOT_LIMITS = ("max_upload_mb", "proxy_hops")
MAY_BE_ZERO = ("min_free_disk_mb",)  # 0: no floor of free disk space


def limit_kinds() -> dict[str, type]:
    """The limits a host may set, each with its kind (int or float), in the policy's order."""
    kinds = {"int": int, "float": float}
    found = dataclasses.fields(DemoPolicy)
    return {item.name: kinds[item.type] for item in found if item.type in kinds and item.name not in NOT_LIMITS}


def _field_help(spec: FieldSpec, lang: str) -> str:
    """A field's own help in ``lang`` (its English, the schema's, for a field the catalog does not know)."""
    name = f"field.{spec.path}.help"
    return text(name, lang) if spec.help and name in english() else spec.help


# --- visitors -----------------------------------------------------------------------------------------------


def visitor_uploads(workspace: Path, policy: DemoPolicy, visitor: str | None) -> Path | None:
    """The folder that holds a visitor's uploaded datasets; None without a (signed) visitor token."""
    visitor = policy.visitor(visitor)
    return visitor_datasets_dir(Path(workspace).resolve(), owner_tag(visitor)) if visitor else None


def visitor_exports(workspace: Path, policy: DemoPolicy, visitor: str | None) -> Path | None:
    """The folder that holds the one export a visitor keeps; None without a (signed) visitor token."""
    visitor = policy.visitor(visitor)
    return visitor_exports_dir(Path(workspace).resolve(), owner_tag(visitor)) if visitor else None


def widget_data_allowed(field: str, value: Any, uploads: Path | None) -> bool:
    """Whether the widget of a data path ``field`` is empty or names only bundled sets and the visitor's uploads:
    for data.path its one path or every dataset of its YAML list (a value that cannot be read is not allowed)."""
    if field != "data.path":
        return not value or data_allowed(str(value), uploads)
    paths = dataset_paths(value)
    return paths is not None and all(data_allowed(path, uploads) for path in paths)


def data_allowed(value: str, uploads: Path | None) -> bool:
    """Whether a data path is a bundled dataset or lies in the visitor's upload folder (never a hub id)."""
    local = find_local_path(value)
    roots = [BUNDLED_DATASETS, *([uploads] if uploads else [])]
    try:
        confine(local if local is not None else value, roots)
    except PathNotAllowed:
        return False
    return True

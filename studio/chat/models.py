"""What the Chat tab can load, and for whom: the model list, the spec a pick stands for, and (in demo mode)
whose a loaded model is. Plain functions of the caller (studio.context.Caller: the workspace, the demo policy,
the visitor, the page's language).

A model's label (``Base · NAME``, ``RUN · checkpoint 10``) is said in the page's language; the chat worker names
the loaded model in English (engine.chat.client.resolve_model) and ``shown_label`` says that name again.
"""

from __future__ import annotations

import weakref
from pathlib import Path

from engine.api import (
    BUNDLED_MODELS,
    CONFIG_FILE,
    ChatClient,
    ChatError,
    ConfigError,
    ModelSpec,
    checkpoint_steps,
    final_weights,
    load_config,
    method_of,
    read_status,
    runs_dir,
)
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.i18n import catalog
from studio.i18n.catalog import SOURCE, key, text

BASE, CHECKPOINT = key("chat.model.base"), key("chat.model.checkpoint")
FINAL = {folder: key(f"chat.model.final_{folder}") for folder in ("adapter", "model")}  # a run's result folder


def final_label(name: str, folder: str, lang: str = SOURCE) -> str:
    """A run's final result: ``NAME · final adapter`` (or ``model``) in ``lang``."""
    return text(FINAL[folder], lang, name=name) if folder in FINAL else f"{name} · final {folder}"


def model_choices(caller: Caller) -> list[tuple[str, str]]:
    """Dropdown choices (label, key): the base models, then each run's final result and its checkpoints (in demo
    mode only the caller's runs), labelled in the caller's language."""
    lang = caller.language
    bases, trained = list(BUNDLED_MODELS), []
    for run_dir in sorted(caller.run_dirs(), key=_created, reverse=True):
        try:
            config = load_config(run_dir / CONFIG_FILE)
        except ConfigError:
            continue  # a config being written or broken by hand: skip it, the next refresh shows it
        name = config.name or run_dir.name
        base = config.model.name_or_path
        bases += [base] if base not in bases else []
        if not method_of(config).model.generates:
            continue  # a model that scores answers (a reward model) has nothing to say in a chat
        final = final_weights(run_dir, config.adapter.is_lora)
        if final is not None:
            trained.append((final_label(name, final.name, lang), f"run:{run_dir.name}"))
        steps = reversed(checkpoint_steps(run_dir))
        trained += [(text(CHECKPOINT, lang, name=name, step=n), f"run:{run_dir.name}:{n}") for n in steps]
    return [(text(BASE, lang, model=base), f"base:{base}") for base in bases] + trained


def shown_label(label: str, lang: str = SOURCE) -> str:
    """The chat worker's English name of a loaded model (``Base · NAME``, ``RUN · final adapter``, ``RUN ·
    checkpoint 10``: the labels of ``model_choices``) in ``lang``; any other label as it is."""
    return catalog.say_again(label, (BASE, CHECKPOINT, *FINAL.values()), lang)


def _created(run_dir: Path) -> float:
    return read_status(run_dir).created_at or 0.0


def spec_for(workspace: Path, key: str | None) -> ModelSpec:
    """The model spec of a dropdown key ("base:NAME", "run:ID" or "run:ID:STEP")."""
    kind, _, rest = (key or "").partition(":")
    if kind == "base" and rest:
        return ModelSpec(base=rest)
    if kind == "run" and rest:
        run_id, _, step = rest.partition(":")
        if "/" not in run_id and not run_id.startswith(".") and (not step or step.isdigit()):
            return ModelSpec(run_dir=runs_dir(workspace) / run_id, checkpoint=int(step) if step else None)
        raise ChatError(f"not a model of this workspace: {key}")
    raise ChatError("pick a model to load first")


def worker_tag(caller: Caller) -> str | None:
    """Who asks, as the chat worker knows them (its ``caller``): in demo mode the visitor's owner tag (a digest,
    as runs record it; None without a valid id), outside demo mode None: one person's studio has nobody to keep
    apart."""
    return owner_tag(caller.visitor) if caller.visitor else None


def holder_for(spec: ModelSpec, tag: str | None) -> str | None:
    """Whom a loaded model serves: a run's model only the caller of ``tag`` (``worker_tag``; None outside demo
    mode: everyone); a base model everyone, since the demo offers only the bundled one, which is public."""
    return tag if spec.run_dir is not None else None


# The pick each client's loaded model was loaded from, beside the ModelInfo it reported then: a page opened later
# (a reload) shows that pick in its dropdown. The info tells whether it is still that model.
_LOADED_FROM: weakref.WeakKeyDictionary[ChatClient, tuple[object, str]] = weakref.WeakKeyDictionary()


def remember_loaded(client: ChatClient, key: str) -> None:
    """Record that the model ``client`` now has loaded is the dropdown's ``key``."""
    if client.info is not None:
        _LOADED_FROM[client] = (client.info, key)


def loaded_run_gone(client: ChatClient, caller: Caller) -> bool:
    """Whether the loaded model was loaded from a run (``remember_loaded``) whose directory is gone since: deleted on
    the Runs tab, its weights would still answer from the chat worker's memory as if the run existed."""
    info_then, key = _LOADED_FROM.get(client, (None, ""))
    if info_then is None or info_then is not client.info or not key.startswith("run:"):
        return False
    run_dir = spec_for(caller.workspace, key).run_dir
    return run_dir is not None and not run_dir.is_dir()


def loaded_pick(client: ChatClient, caller: Caller, choices: list[tuple[str, str]]) -> str | None:
    """The dropdown value (among ``choices``, the caller's ``model_choices``) of the model ``client`` has loaded; None
    when nothing is loaded, the caller may not use it (another visitor's, in demo mode) or it is not among them.

    The pick it was loaded from when it was loaded from the dropdown (``remember_loaded``); else the one choice
    whose label is the worker's name of it, said in the caller's language."""
    info = client.info
    if info is None or not client.may_use(worker_tag(caller)):
        return None
    values = {value for _, value in choices}
    info_then, key = _LOADED_FROM.get(client, (None, None))
    if info_then is info and key in values:
        return key
    named = [value for label, value in choices if label == shown_label(info.label, caller.language)]
    return named[0] if len(named) == 1 else None

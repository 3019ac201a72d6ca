"""The Train form's reward picker (a method that learns from rewards: its section's ``rewards``, such as
``grpo.rewards``): the rewards a user adds with a click, and the check of every reward against the data's first rows
before Start. No Gradio here.

The rewards box stays the one place the rewards are written (the config's YAML, one reward per line);
the picker only appends a filled-in entry that the user then edits, so nothing holds a second copy of them.
The picker's labels are keys the page translates; the check's words are said in the page's language.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from engine.api import ConfigError, RewardSpec, method_of
from studio.demo.caller import Caller
from studio.demo.policy import CUSTOM_REWARD_REFUSED, NORMAL, DemoPolicy
from studio.form.yaml_lists import yaml_list_text
from studio.i18n.catalog import SOURCE, SaidError, key, text
from studio.i18n.widgets import marked
from studio.markup import text_block
from studio.train.actions import checked_config
from studio.train.dataset import problem_text
from studio.train.reward_files import REWARDS_DIR, RewardFileError, rewards_field, store_reward_file, stored_note
from studio.train.starting import check_method_data

# What "Add" writes for each kind: what the kind needs, with a value that works on the demo task.
TEMPLATES: dict[str, dict[str, Any]] = {
    "exact_match": {"kind": "exact_match", "column": "answer", "weight": 1.0},
    "math_match": {"kind": "math_match", "column": "answer", "weight": 1.0},
    "regex": {"kind": "regex", "pattern": "[A-Z][a-z]+ [0-9]{1,2}", "weight": 0.25},
    "length": {"kind": "length", "target_tokens": 16, "weight": 0.1},
    "contains": {"kind": "contains", "text": "because", "absent": False, "weight": 0.5},
    # A relative file is read from the workspace, where "Upload reward file" stores files (reward_files).
    "custom": {"kind": "custom", "file": f"{REWARDS_DIR}/rewards.py", "function": "my_reward", "weight": 1.0},
}
LABELS = {kind: marked(f"train.reward.{kind}") for kind in TEMPLATES}  # the page shows them in its language
NO_KIND, NOT_YAML, NOT_A_LIST, CANNOT_RUN, DATA_UNUSABLE, LOADED_ONE, LOADED_MANY = (
    key(f"train.rewards.{name}")
    for name in ("no_kind", "not_yaml", "not_a_list", "cannot_run", "data_unusable", "loaded_one", "loaded_many")
)


class RewardBoxError(SaidError):
    """Why a reward cannot be added to the box: its English as the message, its key and values to say it in the
    page's language (``said``)."""


def reward_choices(policy: DemoPolicy = NORMAL) -> list[tuple[str, str]]:
    """The picker's list as (label, kind); no custom file in demo mode, where strangers never run code."""
    return [(label, kind) for kind, label in LABELS.items() if not (policy.enabled and kind == "custom")]


def add_reward(box: str | None, kind: str) -> str:
    """The rewards box's text with a filled-in ``kind`` entry appended, one reward per line; ValueError when the
    box holds something other than a YAML list of rewards (the user's text is never overwritten)."""
    if kind not in TEMPLATES:
        raise RewardBoxError(NO_KIND, kind=repr(kind))
    return append_reward(box, TEMPLATES[kind])


def append_reward(box: str | None, entry: dict[str, Any]) -> str:
    """The rewards box's text with ``entry`` appended, one reward per line; RewardBoxError when the box holds
    something other than a YAML list of rewards."""
    try:
        current = yaml.safe_load(box or "") or []
    except yaml.YAMLError:
        raise RewardBoxError(NOT_YAML) from None
    if isinstance(current, dict):
        current = [current]
    if not isinstance(current, list):
        raise RewardBoxError(NOT_A_LIST)
    return yaml_list_text([*current, entry])


def upload_reward_file(
    caller: Caller, path: str | None, values: Mapping[str, Any], field: str
) -> tuple[str | None, str]:
    """An uploaded reward file stored in the workspace (``WORKSPACE/rewards/``) and its first function added to the
    rewards box ``field`` as a custom reward, then every reward checked as "Check rewards" checks them: the box's
    new text (None: left as it was) and Markdown that says what happened, in the caller's language. Refused in demo
    mode, where strangers never run code (the page offers no upload there)."""
    lang = caller.language
    if not path:
        return None, ""
    if caller.policy.enabled:
        return None, _refusal(text(CUSTOM_REWARD_REFUSED, lang), lang)
    try:
        file, functions = store_reward_file(path, caller.workspace)
    except RewardFileError as exc:
        return None, _refusal(exc.said(lang), lang)
    except ValueError as exc:  # a source outside the folders the studio may read
        return None, _refusal(str(exc), lang)
    note = stored_note(file, functions, lang)
    entry = {"kind": "custom", "file": file, "function": functions[0], "weight": 1.0}
    try:
        box = append_reward(values.get(field), entry)
    except RewardBoxError as exc:  # the box holds text of the user's that is no list: it stays for them to fix
        return None, f"{note}\n\n{exc.said(lang)}"
    return box, f"{note}\n\n{check_rewards_message(caller, {**values, field: box})}"


def check_rewards_message(caller: Caller, values: Mapping[str, Any]) -> str:
    """Markdown for the "Check rewards" button: the form's config checked as Start checks it, then each reward
    loaded and called once on the first prompt rows (the method's check, engine.training.rewards.check_rewards),
    or what is wrong with which one; in the caller's language, and in demo mode without server paths."""
    return caller.shown(_check_text(caller, values))


def _check_text(caller: Caller, values: Mapping[str, Any]) -> str:
    from engine.api import DataError

    lang = caller.language
    try:
        config = checked_config(caller, values)
        if rewards_field(method_of(config)) is None:
            return ""
        check_method_data(config)
    except ConfigError as exc:
        return _refusal("\n".join(problem_text(problem, lang) for problem in exc.problems), lang)
    except DataError as exc:
        return _refusal(text(DATA_UNUSABLE, lang, error=exc), lang)
    rewards: list[RewardSpec] = method_of(config).rewards(config)  # the config refuses an empty list
    names = ", ".join(f"{spec.label} × {spec.weight:g}" for spec in rewards)
    return text(LOADED_ONE if len(rewards) == 1 else LOADED_MANY, lang, count=len(rewards), names=names)


def _refusal(message: str, lang: str = SOURCE) -> str:
    return f"{text(CANNOT_RUN, lang)}\n\n{text_block(message)}"

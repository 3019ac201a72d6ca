"""Keep access tokens out of configs: a config is saved in the run directory and shown in the studio.

Tokens come from the environment (HF_TOKEN, WANDB_API_KEY, ...), never from a config field; a text field
that holds one is refused before anything is written, whichever field it is.
"""

from __future__ import annotations

import os
import re
from typing import Any

# Environment variables the training libraries read their tokens from.
SECRET_ENV_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")
# Hugging Face user access tokens: "hf_" and 34 letters and digits (older ones were shorter; 30 is safe).
_HF_TOKEN = re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}")
# Shorter values are too likely to turn up by chance in ordinary text.
_MIN_SECRET_LENGTH = 8
# What a refused text is told, by name: English with ``{placeholders}``, the one definition of each message (the
# studio says it again in the visitor's language: studio.i18n.problems, keys ``check.<name>``).
SECRET_MESSAGES = {
    "secret_env_value": "holds the value of ${name}; tokens are read from the environment and never saved in a config",
    "secret_hf_token": "looks like a Hugging Face access token (hf_...); set HF_TOKEN in the environment instead, "
    "tokens are never saved in a config",
}


def secret_problem(text: str) -> str | None:
    """Why ``text`` must not be saved (it holds an access token), or None when it holds none."""
    for name in SECRET_ENV_VARS:
        secret = os.environ.get(name, "")
        if len(secret) >= _MIN_SECRET_LENGTH and secret in text:
            return SECRET_MESSAGES["secret_env_value"].format(name=name)
    if _HF_TOKEN.search(text):
        return SECRET_MESSAGES["secret_hf_token"]
    return None


def refuse_secrets(value: Any) -> Any:
    """Return ``value`` unchanged, or raise ValueError if any text in it (lists, mappings too) holds a token."""
    texts: list[str] = []
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, (list, tuple)):
        texts = [item for item in value if isinstance(item, str)]
    elif isinstance(value, dict):
        texts = [str(item) for pair in value.items() for item in pair]
    for text in texts:
        problem = secret_problem(text)
        if problem:
            raise ValueError(problem)
    return value

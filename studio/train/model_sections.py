"""The form's sections that only some base models read: a config section named after a modality other than text
(``vision``: image size and the parts that train) shows while the model field names a model of that modality, as a
method's section shows while that method is picked.

What the model reads comes from its config.json (engine.api.model_modality, no torch). A model whose modality
cannot be told (a hub id offline and not cached, a path the page may not name, an empty field) shows every such
section: hiding a setting that may apply would be worse than showing one that does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from engine.api import VISION_MODALITY, model_modality
from studio.path_guard import allowed_roots, path_problem

# The modalities a config section may be named after (text, every model's, has none).
MODALITIES = (VISION_MODALITY,)


def modality_sections(sections: Iterable[str]) -> list[str]:
    """Of the config's top-level sections (their names, in order), those named after a modality."""
    return [name for name in sections if name in MODALITIES]


def model_reads(name_or_path: str | None, revision: str | None, workspace: Path | None) -> str | None:
    """The modality of the model the field names (``vision``, ``text``), or None when it cannot be told. A path the
    page may not name (studio.path_guard) is not read: None, as for a model that is not there."""
    name = (name_or_path or "").strip()
    if not name or path_problem(name, allowed_roots(workspace)):
        return None
    return model_modality(name, (revision or "").strip() or None)


def shown_sections(
    name_or_path: str | None, revision: str | None, workspace: Path | None, sections: Iterable[str]
) -> dict[str, bool]:
    """Section -> whether it shows for the model the form names: for a model of its modality, or of none known."""
    modality = model_reads(name_or_path, revision, workspace)
    return {section: modality is None or modality == section for section in sections}

"""Which training file an eval file belongs to, so that a new training file does not silently keep the eval file
of the one before (after an upload, the demo preset's eval file used to stay and evaluate the wrong task).

The rule, applied when the training data changes (an upload, a bundled pick, a typed path, a dataset added to or
removed from a list in data.path) while the eval path stays as it was:

- the eval file is kept when it is the partner of a training file: the same folder and the same name with
  ``train`` where it says ``eval`` (or test, val, valid, validation, dev), as ``demo_sft_eval.jsonl`` is for
  ``demo_sft_train.jsonl``;
- it is cleared when it is the partner of another training file that exists: it belonged to that dataset;
- it is kept when a training file it was chosen with still trains (a dataset was added beside it, or another
  one removed);
- otherwise it is kept and flagged, since nothing tells whose it is (one eval set shared by several training
  files is fine, a stale one is not).

When the new training data is one file that has an eval partner (``x_train.jsonl`` beside ``x_eval.jsonl``, as each
bundled set has), that partner takes the place of an eval file that belonged to another training file, and fills
an empty eval path when the file was picked from the list of sets (``PICKED``): picking ``demo_dpo_train`` pairs
``demo_dpo_eval``.

A config load sets both paths on purpose: it is only remembered (``LOADED``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.api import find_local_path
from studio.form.yaml_lists import dataset_paths
from studio.i18n.catalog import SOURCE, key, text

EVAL_WORDS = ("eval", "evaluation", "test", "val", "valid", "validation", "dev")
# A whole word of a file name: "demo_sft_eval", "eval-set" and "Test" match, "medieval" and "devices" do not.
_EVAL_WORD = re.compile(r"(?<![a-z0-9])(" + "|".join(EVAL_WORDS) + r")(?![a-z0-9])", re.IGNORECASE)
_TRAIN_WORD = re.compile(r"(?<![a-z0-9])train(?![a-z0-9])", re.IGNORECASE)
LOADED = "loaded"  # the ``source`` of a change that a config load made
PICKED = "picked"  # the ``source`` of a change that a pick of the list of datasets made
# The notes' words (studio.i18n).
CLEARED, CLEARED_LIST, KEPT, KEPT_LIST, PAIRED = (
    key(f"train.pairing.{name}") for name in ("cleared", "cleared_list", "kept", "kept_list", "paired")
)
HELD_OUT, HELD_OUT_LIST = key("train.pairing.held_out"), key("train.pairing.held_out_list")
# The share of the training rows held out when the eval file is cleared while the run evaluates and holds out
# nothing: without eval rows, Start would refuse the run the studio itself left without them.
HOLD_OUT = 0.1


@dataclass(frozen=True)
class EvalFollow:
    """What a change of the training path does to the eval path."""

    eval_path: str | None  # the eval path to show; None: leave the field as it is
    note: str | None  # Markdown for the dataset panel; None: leave the note shown, "": clear it
    seen: tuple[str, str]  # (training path, eval path) that the next change is compared with
    eval_size: float | None = None  # data.eval_size to show; None: leave the field as it is


def training_partner(eval_path: str) -> Path | None:
    """The training file an eval file pairs with by name, when one exists: ``x_eval.jsonl`` -> ``x_train.jsonl``."""
    local = find_local_path(eval_path) if eval_path.strip() else None
    if local is None or not local.is_file():
        return None
    for match in reversed(list(_EVAL_WORD.finditer(local.stem))):  # the last word first: "test_set_eval"
        word = match.group()
        train = "TRAIN" if word.isupper() else "Train" if word[0].isupper() else "train"
        candidate = local.with_name(local.stem[: match.start()] + train + local.stem[match.end() :] + local.suffix)
        if candidate.is_file():
            return candidate.resolve()
    return None


def eval_partner(path: str) -> str | None:
    """The eval file that pairs with a training file by name, when one exists, written as ``path`` is written
    (``assets/datasets/x_train.jsonl`` -> ``assets/datasets/x_eval.jsonl``): ``train`` replaced by an eval word,
    in its case."""
    written = Path(path.strip())
    local = find_local_path(str(written)) if path.strip() else None
    if local is None or not local.is_file():
        return None
    stem = written.stem
    for match in reversed(list(_TRAIN_WORD.finditer(stem))):  # the last word first, as training_partner reads
        word = match.group()
        for eval_word in EVAL_WORDS:
            cased = eval_word.upper() if word.isupper() else eval_word.title() if word[0].isupper() else eval_word
            candidate = written.with_name(stem[: match.start()] + cased + stem[match.end() :] + written.suffix)
            found = find_local_path(str(candidate))
            if found is not None and found.is_file():
                return str(candidate)
    return None


def same_file(first: str, second: str) -> bool:
    """Whether two paths of the form name the same file (a hub id or a missing file: the same text)."""
    first, second = first.strip(), second.strip()
    if first == second:
        return True
    local = find_local_path(first) if first else None
    return local is not None and local == (find_local_path(second) if second else None)


def training_files(path: str) -> list[str]:
    """The training paths the form's data.path names: the one path, or each dataset's of a YAML list (the text
    itself when it cannot be read as either)."""
    files = dataset_paths(path)
    return files if files is not None else [path]


def same_files(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether two lists of training paths name the same files, in any order (weights and caps aside)."""
    return all(any(same_file(one, other) for other in second) for one in first) and all(
        any(same_file(one, other) for other in first) for one in second
    )


def follow_training_path(
    seen: Sequence[str] | None,
    path: str,
    eval_path: str,
    source: str = "",
    lang: str = SOURCE,
    holds_out: bool = True,
) -> EvalFollow:
    """The eval path after the form's training data became ``path``: one path, or a YAML list of datasets (see the
    module's rule); the note in ``lang``.

    ``seen`` is the (training path, eval path) pair of the previous call, None at first; ``source`` is ``LOADED``
    for a config load, whose eval path is kept as it is, and ``PICKED`` for a pick of the list of datasets.
    ``holds_out`` False: the run evaluates and data.eval_size holds out nothing, so a cleared eval file is
    replaced by HOLD_OUT of the training rows.
    """
    path, eval_path = (path or "").strip(), (eval_path or "").strip()
    now = (path, eval_path)
    if not seen or source == LOADED:
        return EvalFollow(None, "" if source == LOADED else None, now)
    old_path, old_eval = (str(part or "").strip() for part in seen)
    old_files, files = training_files(old_path), training_files(path)
    if same_files(old_files, files):
        # Same training files; a new eval path makes a note about the old one obsolete.
        return EvalFollow(None, None if eval_path == old_eval else "", now)
    own_eval = eval_partner(files[0]) if len(files) == 1 else None
    if not eval_path and source == PICKED and own_eval is not None:  # a picked set comes with its eval set
        return _paired(path, own_eval, lang)
    if not eval_path or eval_path != old_eval:  # no eval file, or one chosen with the new training data
        return EvalFollow(None, "", now)
    partner = training_partner(eval_path)
    if partner is not None and any(same_file(str(partner), file) for file in files):
        return EvalFollow(None, "", now)
    if partner is not None and own_eval is not None:  # another set's eval file: this set's own takes its place
        return _paired(path, own_eval, lang)
    if partner is not None:
        return _cleared(path, eval_path, partner, len(files) > 1, holds_out, lang)
    if any(same_file(old, file) for old in old_files for file in files):
        return EvalFollow(None, "", now)  # chosen with a training file that still trains: it still fits
    names = ", ".join(f"`{_shown(Path(old).name)}`" for old in old_files)
    note = text(KEPT if len(old_files) == 1 else KEPT_LIST, lang, eval_file=_shown(eval_path), names=names)
    return EvalFollow(None, note, now)


def _cleared(path: str, eval_path: str, partner: Path, several: bool, holds_out: bool, lang: str) -> EvalFollow:
    """The eval path cleared, with a note that says whose it was; HOLD_OUT of the training rows held out instead
    when nothing else would evaluate."""
    words = {"eval_file": _shown(eval_path), "partner": partner.name}
    if holds_out:
        return EvalFollow("", text(CLEARED_LIST if several else CLEARED, lang, **words), (path, ""))
    note = text(HELD_OUT_LIST if several else HELD_OUT, lang, eval_size=HOLD_OUT, **words)
    return EvalFollow("", note, (path, ""), eval_size=HOLD_OUT)


def holds_out(values: Mapping[str, Any]) -> bool:
    """Whether the form's run (its widget values) would still have eval rows without an eval file: it does not
    evaluate, or data.eval_size holds out rows (a box that cannot be read counts as holding out: its error shows)."""
    if str(values.get("train.eval_strategy") or "no") == "no":
        return True
    try:
        return float(values.get("data.eval_size") or 0) > 0
    except (TypeError, ValueError):
        return True


def _paired(path: str, eval_path: str, lang: str) -> EvalFollow:
    """The eval path set to the training file's own eval file, with a note that says so."""
    note = text(PAIRED, lang, eval_file=_shown(Path(eval_path).name), train_file=_shown(Path(path).name))
    return EvalFollow(eval_path, note, (path, eval_path))


def _shown(text: str) -> str:
    """A path for inline code in Markdown (a backtick would end it)."""
    return text.replace("`", "'")

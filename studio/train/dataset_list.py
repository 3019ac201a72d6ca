"""Several datasets in one run, as the Train tab edits them: the data.path box holds one path, or the YAML list of
datasets (``[{path: a.jsonl}, {path: b.jsonl, weight: 2.0}]``) that engine.config.DatasetEntry reads.

"+ Add another dataset" turns the one path into a list of one; while the box holds a list, a picked or uploaded
dataset joins it instead of replacing it. Each dataset's weight and cap are set (and a dataset removed) by its
number; a list left with one plain dataset becomes a plain path again. Plain functions of widget values: the tab
wires them, the tests call them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.api import DatasetEntry, datasets_dir
from studio.demo.caller import Caller
from studio.form.schema import FieldSpec, leaf_specs
from studio.form.values import from_widget
from studio.form.yaml_lists import datasets_text, read_datasets
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.problems import translate_problem
from studio.i18n.widgets import marked
from studio.train.dataset import UPLOAD_SUFFIXES, bundled_datasets
from studio.train.eval_pairing import same_file

# The table's header after its number column, by key (studio.i18n); its English for the table a page first gets.
HEADER_KEYS = tuple(key(f"train.list.{name}") for name in ("dataset", "weight", "max_samples"))
TABLE_HEADERS = ["#", *(text(name) for name in HEADER_KEYS)]
ALL, NEXT, FIRST, LAST, NOT_A_LIST, PICK = (
    key(f"train.list.{name}") for name in ("all", "next", "first", "last", "not_a_list", "pick")
)
YOUR_UPLOAD, UPLOAD = marked("train.list.your_upload"), marked("train.list.upload")  # labels the page translates


def table_headers(lang: str = SOURCE) -> list[str]:
    """The table's header in ``lang``."""
    return ["#", *(text(name, lang) for name in HEADER_KEYS)]


def entry_spec(name: str) -> FieldSpec:
    """The schema's field of a dataset of the list (weight, max_samples): label, help and bounds of its widget."""
    return next(spec for spec in leaf_specs(DatasetEntry) if spec.path == name)


def listed(value: Any) -> list[dict[str, Any]] | None:
    """The datasets of the box when it holds a list (each a mapping with its path); None for one path, or for a
    value that cannot be read (the config check says what is wrong with it)."""
    try:
        read = read_datasets("" if value is None else str(value))
    except ValueError:
        return None
    if isinstance(read, str) or not all(isinstance(item, (str, dict)) for item in read):
        return None
    return [{"path": item} if isinstance(item, str) else dict(item) for item in read]


def _written(entries: list[dict[str, Any]]) -> str:
    """The box's text for ``entries``: one plain path when a single dataset is left without settings of its own."""
    if len(entries) == 1 and set(entries[0]) == {"path"} and isinstance(entries[0]["path"], str):
        return entries[0]["path"]
    return datasets_text(entries)


def start_list(value: Any, lang: str = SOURCE) -> tuple[Any, str]:
    """ "+ Add another dataset": the box's one path as a list of one, so the next pick or upload joins it; and a
    note for the panel (in ``lang``). A list stays as it is."""
    box = "" if value is None else str(value)
    if listed(box) is not None:
        return box, text(NEXT, lang)
    if not box.strip():
        return box, text(FIRST, lang)
    return datasets_text([{"path": box.strip()}]), text(NEXT, lang)


def add_dataset(value: Any, path: str) -> str:
    """The box after a dataset was picked or uploaded: ``path`` joins a list, or replaces the one path (as before
    lists existed)."""
    entries = listed(value)
    if entries is None:
        return path
    return datasets_text([*entries, {"path": path}])


def set_dataset(value: Any, index: Any, weight: Any, max_samples: Any, lang: str = SOURCE) -> tuple[Any, str]:
    """The box with dataset ``index``'s weight and cap set from their widgets; and a note ("" when done; in
    ``lang``)."""
    entries, problem = _pick(value, index, lang)
    if entries is None:
        return value, problem
    try:
        weight = from_widget(entry_spec("weight"), weight)
        cap = from_widget(entry_spec("max_samples"), max_samples)
    except ValueError as exc:
        return value, f"⚠ {translate_problem(str(exc), lang)}"
    entry = {key: item for key, item in entries[int(index)].items() if key not in ("weight", "max_samples")}
    entry.update({"weight": weight} if weight not in (None, 1) else {})
    entry.update({"max_samples": cap} if cap is not None else {})
    entries[int(index)] = entry
    return _written(entries), ""


def remove_dataset(value: Any, index: Any, lang: str = SOURCE) -> tuple[Any, str]:
    """The box without dataset ``index``; and a note ("" when done; in ``lang``). The last dataset stays: a run
    needs data."""
    entries, problem = _pick(value, index, lang)
    if entries is None:
        return value, problem
    if len(entries) == 1:
        return value, text(LAST, lang)
    del entries[int(index)]
    return _written(entries), ""


def _pick(value: Any, index: Any, lang: str = SOURCE) -> tuple[list[dict[str, Any]] | None, str]:
    """The box's datasets when ``index`` is one of them, else None and why not (in ``lang``)."""
    entries = listed(value)
    if entries is None:
        return None, text(NOT_A_LIST, lang)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(entries):
        return None, text(PICK, lang)
    return entries, ""


def entry_settings(value: Any, index: Any) -> tuple[Any, str]:
    """The weight and cap widgets' values for dataset ``index`` of the list (1 and empty when it has none)."""
    entries = listed(value) or []
    if not isinstance(index, int) or not 0 <= index < len(entries):
        return 1.0, ""
    cap = entries[index].get("max_samples")
    return entries[index].get("weight", 1.0), "" if cap is None else str(cap)


def table_rows(value: Any, lang: str = SOURCE) -> list[list[Any]]:
    """The list as the panel's table shows it: number, file name, weight, cap (its absence in ``lang``; [] for
    one path)."""
    rows = []
    for number, entry in enumerate(listed(value) or []):
        path = entry.get("path")
        name = Path(path).name if isinstance(path, str) else str(path)
        cap = entry.get("max_samples")
        rows.append([number, name, entry.get("weight", 1), text(ALL, lang) if cap is None else cap])
    return rows


def entry_choices(value: Any) -> list[tuple[str, int]]:
    """The datasets of the list as (label, number) for the picker of the one to change."""
    return [(f"{row[0]}: {row[1]}", row[0]) for row in table_rows(value)]


def dataset_choices(caller: Caller) -> list[tuple[str, str]]:
    """(label, value) of the datasets to pick: the bundled sets, then earlier uploads, newest first. In demo mode
    only the caller's own uploads, named by their file name (as the demo's form names an upload); elsewhere the
    workspace's uploads folder, by path. The labels' words are translated by the page."""
    choices = [(path, path) for path in bundled_datasets()]
    if caller.policy.enabled:
        return choices + [(f"{YOUR_UPLOAD} {path.name}", path.name) for path in _uploads(caller.uploads)]
    uploaded = _uploads(datasets_dir(caller.workspace))
    return choices + [(f"{UPLOAD} {path.name}", str(path.resolve())) for path in uploaded]


def choice_in_use(choices: list[tuple[str, str]], value: Any) -> str | None:
    """The value of the dataset of ``choices`` (label, value) that the data.path box names, for the list to show
    the set in use; None while the box holds a list of datasets, or a path that ``choices`` lacks."""
    path = "" if value is None else str(value).strip()
    if not path or listed(path) is not None:
        return None
    return next((choice for _, choice in choices if same_file(choice, path)), None)


def in_use(caller: Caller, value: Any) -> tuple[list[tuple[str, str]], str | None]:
    """The list of datasets to pick (``dataset_choices``) and the one of them that the data.path box names."""
    choices = dataset_choices(caller)
    return choices, choice_in_use(choices, value)


def _uploads(folder: Path | None) -> list[Path]:
    """The dataset files in an uploads folder, newest first ([] when there is none)."""
    if folder is None or not folder.is_dir():
        return []
    files = [path for path in folder.iterdir() if path.is_file() and path.suffix.lower() in UPLOAD_SUFFIXES]
    return sorted(files, key=lambda path: path.stat().st_mtime, reverse=True)

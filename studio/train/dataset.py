"""The dataset part of the Train tab: pick a file (upload, path or bundled set) and check it before launch.
Its widgets are built in studio.train.widgets; here are the plain checks and copies they call.

The check shows the detected format, row and token counts, warnings, the first training rows with the
loss-bearing tokens marked, or the DataError that names the bad row. The tokenizer (which imports
transformers, seconds on a cold start) is loaded on the first check and cached per model. Rows with images are
shown from their rows instead, beside thumbnails of their images (studio.train.image_rows): no processor, no torch.
"""

from __future__ import annotations

import filecmp
import html
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.api import PROJECT_ROOT, ConfigError, Problem, RunConfig, datasets_dir, has_images, parse_config
from studio.form.schema import leaf_specs
from studio.form.values import values_to_data
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.problems import translate_problem, translate_warning
from studio.markup import text_block
from studio.path_guard import BUNDLED_DATASETS, confine_file, guard_config
from studio.train.image_rows import image_rows_html, images_summary, preparing_note
from studio.train.lengths import model_context, rows_that_fit, suggest_max_length
from studio.train.run_length import epochs_warmup_warning

UPLOAD_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".parquet", ".txt")
# The fields a dataset check depends on: changing anything else does not change what the check shows.
CHECK_PATHS = ("method", "model.", "data.", "train.max_length", "train.seed")  # the method: which formats it takes

# The panel's words (studio.i18n), said in the page's language.
BAD_TYPE = key("train.upload.bad_type")
FIX_FIRST, COUNTING, NO_TOKENIZER, UNUSABLE = (
    key(f"train.data.{name}") for name in ("fix_first", "counting", "no_tokenizer", "unusable")
)
GIVEN_LISTED, GIVEN_FILE, ROWS, FORMAT, DATASETS, TOKENS, COLUMNS, EVAL_FILE = (
    key(f"train.data.{name}")
    for name in ("given_listed", "given_file", "rows", "format", "datasets", "tokens", "columns", "eval_file")
)
NO_LOSS, LEGEND_LOSS, LEGEND_PROMPT, FILE_ROW, ROW, COUNTS, TRUNCATED = (
    key(f"train.data.{name}")
    for name in ("no_loss", "legend_loss", "legend_prompt", "file_row", "row", "counts", "truncated")
)
TOOL_ROWS = key("train.data.tool_rows")
# The limits a suggested max_length stays within, named in the advice (studio.train.lengths).
MODEL_CONTEXT, DEMO_LIMIT = key("train.length.context"), key("train.length.demo")

_tokenizers: dict[tuple[str, str | None, bool], Any] = {}
_tokenizer_lock = threading.Lock()


def bundled_datasets() -> list[str]:
    """The bundled demo sets, as project-relative paths the engine resolves from any directory."""
    return [str(path.relative_to(PROJECT_ROOT)) for path in sorted(BUNDLED_DATASETS.glob("*.jsonl"))]


def copy_upload(source: str | Path, workspace: Path, folder: Path | None = None, lang: str = SOURCE) -> Path:
    """Copy an uploaded file into ``folder``, by default ``WORKSPACE/datasets/`` (Gradio's temp copy does not
    outlive the session).

    A file of the same name and content is reused; a different one gets a numbered name. Raises ValueError
    for a file type the engine cannot read, or a source outside the folders the studio may read (``workspace``
    being the one of them that is not always allowed). The file type's error is in ``lang``.
    """
    source = Path(source)
    if source.suffix.lower() not in UPLOAD_SUFFIXES:
        raise ValueError(text(BAD_TYPE, lang, name=source.name, types=", ".join(UPLOAD_SUFFIXES)))
    source = confine_file(source, workspace, "upload")
    return store_upload(source, Path(folder) if folder is not None else datasets_dir(workspace)).resolve()


def store_upload(source: Path, folder: Path) -> Path:
    """Copy ``source`` into ``folder`` under its own name: a file of that name and content there is reused, a
    different one gets a numbered name (``rows-1.jsonl``). Returns the stored file."""
    folder.mkdir(parents=True, exist_ok=True)
    target, number = folder / source.name, 1
    while target.exists() and not filecmp.cmp(source, target, shallow=False):
        target = folder / f"{source.stem}-{number}{source.suffix}"
        number += 1
    if not target.exists():
        shutil.copyfile(source, target)
    return target


def get_tokenizer(config: RunConfig) -> Any:
    """The model's tokenizer, loaded once per (model, revision) for the life of the studio."""
    key = (config.model.name_or_path, config.model.revision, config.model.trust_remote_code)
    with _tokenizer_lock:
        if key not in _tokenizers:
            from engine.api import load_tokenizer

            _tokenizers[key] = load_tokenizer(config)
        return _tokenizers[key]


def cached_tokenizer(config: RunConfig) -> Any | None:
    """The tokenizer if a check already loaded it, else None (never loads)."""
    return _tokenizers.get((config.model.name_or_path, config.model.revision, config.model.trust_remote_code))


def check_config(values: Mapping[str, Any], workspace: Path | None = None) -> RunConfig:
    """A config holding just what the dataset check needs, so a bad learning rate does not block it.

    Raises ConfigError when a model or data field (or max_length / seed) is invalid, or names a path outside
    the folders the studio may read (the workspace when given; see studio.path_guard).
    """
    specs = [spec for spec in leaf_specs() if spec.path.startswith(CHECK_PATHS)]
    data, problems = values_to_data(values, specs)
    if problems:
        raise ConfigError(problems)
    return guard_config(parse_config(data), workspace)


@dataclass
class DatasetCheck:
    """What the panel shows after a check."""

    summary: str  # Markdown: format, rows, tokens, columns, warnings
    examples: str  # HTML: rendered rows with loss-bearing text marked
    error: str  # Markdown: why the dataset cannot be used ("" when it can)
    format: str | None = None
    max_length: int | None = None  # a train.max_length to suggest: too many rows are longer than the form's
    fit: str = ""  # Markdown: how many rows fit whole in max_length, shown where the dataset is picked


def check_dataset(
    values: Mapping[str, Any],
    with_tokens: bool = True,
    num_examples: int = 3,
    workspace: Path | None = None,
    max_length_cap: int | None = None,
    lang: str = SOURCE,
) -> DatasetCheck:
    """Check the form's dataset: rows first (fast); with ``with_tokens`` also token counts, examples and, when many
    rows are cut short, a longer max_length to use (at most the model's context and ``max_length_cap``, the demo's).
    The panel's words are in ``lang``; a DataError that names a row stays as the engine wrote it.

    Paths must lie in the folders the studio may read: the ``workspace``, assets/, uploads, allowed ones.
    """
    from engine.api import DataError, check_tokens, inspect_run_data

    try:
        config = check_config(values, workspace)
    except ConfigError as exc:
        return DatasetCheck("", "", error_markdown(text(FIX_FIRST, lang) + "\n" + problems_text(exc, lang), lang))
    try:
        report = inspect_run_data(config)
    except (DataError, ConfigError) as exc:  # ConfigError: data that the chosen method does not train on
        return DatasetCheck("", "", error_markdown(problems_text(exc, lang), lang))
    warmup = epochs_warmup_warning(values, report.num_rows, lang)
    warned = f"\n\n⚠ {warmup}" if warmup else ""  # the run's length in steps is known once the rows are counted
    if has_images(report.format):  # previewed from its rows: the model's processor would load torch here
        return image_check(config, report, warned, with_tokens, num_examples, lang)
    if not with_tokens:
        counting = f"\n\n*{text(COUNTING, lang)}*"
        return DatasetCheck(summary_markdown(report, lang) + warned + counting, "", "", report.format)
    try:
        tokenizer = get_tokenizer(config)
    except Exception as exc:  # an unknown model, no network for a hub id, a broken tokenizer file, ...
        note = "\n\n" + text(NO_TOKENIZER, lang, model=config.model.name_or_path, error=_first_line(exc))
        return DatasetCheck(summary_markdown(report, lang) + warned + note, "", "", report.format)
    try:
        checked = check_tokens(config, tokenizer, num_examples)
    except DataError as exc:  # one that reads as a warning (no tool call left whole) is said in ``lang``
        return DatasetCheck("", "", error_markdown(translate_warning(str(exc), lang), lang), report.format)
    report = checked.report
    context = model_context(config.model.name_or_path, config.model.revision, tokenizer)
    limits = {MODEL_CONTEXT: context, DEMO_LIMIT: max_length_cap}
    max_length = config.train.max_length
    advice = suggest_max_length(checked.lengths, report.num_dropped, max_length, limits)
    summary = summary_markdown(report, lang) + warned + (f"\n\n{advice.markdown(lang)}" if advice else "")
    suggestion = advice.suggestion if advice else None
    fit = rows_that_fit(checked.lengths, report.num_dropped, max_length, context, lang)
    return DatasetCheck(summary, examples_html(checked.examples, lang), "", report.format, suggestion, fit)


def image_check(
    config: RunConfig, report: Any, warned: str, with_tokens: bool, num_examples: int, lang: str = SOURCE
) -> DatasetCheck:
    """The check of data with images, whose rows and images ``report`` found usable: with ``with_tokens`` its first
    rows beside thumbnails of their images (studio.train.image_rows); their tokens are counted at launch."""
    from engine.api import DataError, image_rows

    summary = summary_markdown(report, lang) + warned
    if not with_tokens:
        return DatasetCheck(f"{summary}\n\n{preparing_note(lang)}", "", "", report.format)
    try:
        rows = image_rows(config, num_examples)
    except DataError as exc:  # an image changed on disk since the check
        return DatasetCheck("", "", error_markdown(str(exc), lang), report.format)
    summary += f"\n\n{images_summary(rows.num_images, lang)}"
    return DatasetCheck(summary, image_rows_html(rows.examples, lang), "", report.format)


def problem_text(problem: Problem, lang: str = SOURCE) -> str:
    """One of a config's problems as a line that starts with the field to fix, its message in ``lang`` where the
    studio can say it (studio.i18n.problems)."""
    message = translate_problem(problem.message, lang)
    return f"{problem.field}: {message}" if problem.field else message


def problems_text(error: ValueError, lang: str = SOURCE) -> str:
    """A ConfigError's problems, one a line, in ``lang`` (studio.i18n.problems); any other error as it reads."""
    if isinstance(error, ConfigError):
        return "\n".join(problem_text(problem, lang) for problem in error.problems)
    return str(error)


def error_markdown(message: str, lang: str = SOURCE) -> str:
    """A dataset problem, shown whole (row lists span several lines), under a heading in ``lang``."""
    return f"{text(UNUSABLE, lang)}\n\n{text_block(message)}"


def summary_markdown(report: Any, lang: str = SOURCE) -> str:
    """The DataReport as a few lines of Markdown in ``lang``; a list of datasets gets a line for each. The
    engine's warnings are said in ``lang`` where they come from its templates (studio.i18n.problems)."""
    count = f"{report.num_source_rows:,}"
    given = text(GIVEN_LISTED, lang, count=count) if report.listed else text(GIVEN_FILE, lang, count=count)
    rows = text(ROWS, lang, train=f"{report.num_rows:,}", eval=f"{report.num_eval_rows:,}", given=given)
    lines = [text(FORMAT, lang, format=report.format, rows=rows)]
    if report.listed:
        listing = "\n".join(f"- `{dataset.summary()}`" for dataset in report.datasets)
        lines.append(f"{text(DATASETS, lang)}\n{listing}")
    if report.num_tokens is not None:
        lines.append(text(TOKENS, lang, tokens=f"{report.num_tokens:,}", loss=f"{report.num_loss_tokens:,}"))
    lines.append(text(COLUMNS, lang, columns=", ".join(f"`{column}`" for column in report.columns)))
    if report.eval_source:
        lines.append(text(EVAL_FILE, lang, path=report.eval_source))
    if report.num_tool_rows:
        counts = {"rows": f"{report.num_tool_rows:,}", "whole": f"{report.num_tool_rows_whole:,}"}
        lines.append(text(TOOL_ROWS, lang, **counts))
    lines += [f"⚠ {translate_warning(warning, lang)}" for warning in report.warnings]
    return "\n\n".join(lines)


_LOSS_STYLE = "background:#bbf7d0;color:#14532d;border-radius:2px"
_PROMPT_STYLE = "color:#6b7280"


def examples_html(examples: list[Any], lang: str = SOURCE) -> str:
    """Rows as the model sees them: loss-bearing text on green, prompt text grey; everything escaped. The answers
    of a preference row stand side by side (chosen | rejected), each headed by its side; a kto answer is headed
    by its label. The panel's words are in ``lang``."""
    if not examples:
        return f"<p>{html.escape(text(NO_LOSS, lang))}</p>"
    legend = (
        f'<div style="font-size:12px;margin-bottom:6px"><span style="{_LOSS_STYLE}">'
        f"&nbsp;{html.escape(text(LEGEND_LOSS, lang))}&nbsp;</span> &nbsp;"
        f'<span style="{_PROMPT_STYLE}">{html.escape(text(LEGEND_PROMPT, lang))}</span></div>'
    )
    rows: dict[tuple[str, int], list[Any]] = {}
    for example in examples:  # a row's answers follow each other
        rows.setdefault((example.source, example.row), []).append(example)
    return legend + "".join(_row_html(answers, lang) for answers in rows.values())


def _row_html(answers: list[Any], lang: str = SOURCE) -> str:
    """One row's card: its counts and text, or for a preference / kto row each answer headed by its side."""
    first = answers[0]
    if first.source:
        where = text(FILE_ROW, lang, file=Path(first.source).name, row=first.row)
    else:
        where = text(ROW, lang, row=first.row)
    if not first.side:
        head, body = f"{html.escape(where)} · {_counts(first, lang)}", _marked_text(first)
    else:
        columns = "".join(
            f'<div class="ts-answer" data-side="{html.escape(example.side)}" style="min-width:0">'
            f'<div style="font-size:12px;opacity:.75"><b>{html.escape(example.side)}</b> · '
            f"{_counts(example, lang)}</div>{_marked_text(example)}</div>"
            for example in answers
        )
        grid = f"display:grid;grid-template-columns:repeat({len(answers)},minmax(0,1fr));gap:10px"
        head, body = html.escape(where), f'<div style="{grid}">{columns}</div>'
    return (
        '<div class="ts-example" style="border:1px solid var(--border-color-primary,#ddd);border-radius:6px;'
        f'padding:6px 8px;margin-bottom:6px"><div style="font-size:12px;opacity:.75">{head}</div>{body}</div>'
    )


def _counts(example: Any, lang: str = SOURCE) -> str:
    counts = html.escape(text(COUNTS, lang, tokens=example.num_tokens, loss=example.num_loss_tokens))
    return counts + (f" · {html.escape(text(TRUNCATED, lang))}" if example.truncated else "")


def _marked_text(example: Any) -> str:
    """The sequence's text, loss-bearing pieces marked, everything escaped."""
    text = "".join(
        f'<mark class="ts-loss" style="{_LOSS_STYLE}">{html.escape(piece)}</mark>'
        if loss
        else f'<span class="ts-prompt" style="{_PROMPT_STYLE}">{html.escape(piece)}</span>'
        for piece, loss in example.segments
    )
    return f'<pre style="white-space:pre-wrap;margin:4px 0 0;font-size:13px;background:none">{text}</pre>'


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]

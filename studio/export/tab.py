"""The Export tab: save a run's adapter or a merged model with a model card, download it as a zip, push it.

The work runs in a background ``python -m engine export --zip`` job (engine.export.exports / engine.runs.jobs); this tab
checks the request first (a refused export says why at once), follows the job's progress with a ``gr.Timer``
active only while it runs, and offers the zip through a ``gr.DownloadButton`` when it is done. A hub token
typed here goes to the job's environment only: never to disk, the command line or a log.

Outside demo mode the zip is served straight from WORKSPACE/exports/ (a static path: a merged model can be
large). In demo mode nothing there is served, since a zip's name is easy to guess (``<run id>-adapter.zip``):
the visitor who made it gets a private copy, which Gradio copies into its cache under a path that names a
digest of the content and a secret seed, and serves only there.

What the server writes here is in the page's language (studio.i18n); the engine's reasons (a refused export, a
failed job's error) as the engine wrote them.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import gradio as gr

from engine.api import ArtifactError, JobStatus, export, exports_dir, jobs, runs
from studio.context import StudioContext
from studio.demo import jobs as demo_jobs
from studio.demo.caller import Caller
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.widgets import marked, t
from studio.jobs.view import (
    PICK_RUN,
    checkpoint_of,
    finished_runs,
    job_status,
    progress_html,
    weight_choices,
)
from studio.jobs.widgets import action_buttons, cancel_job, refresh_on_open, stale_outcome
from studio.markup import message_html
from studio.path_guard import private_copy

POLL_SECONDS = 0.5
KIND_CHOICES = [
    (t("export.kind.adapter"), "adapter"),
    (t("export.kind.merged"), "merged"),
    (t("export.kind.gguf"), "gguf"),
    (t("export.kind.gguf_lora"), "gguf-lora"),
]
GGUF_KINDS = ("gguf", "gguf-lora")  # the type picker offers GGUF's tensor types for these, a merge's dtypes otherwise
# What the kinds are (HTML: the page translates it in place).
HELP = f'<div class="ts-export-help">{marked("export.help")} {marked("export.help.gguf")}</div>'
DTYPE, GGUF_TYPE = key("export.dtype"), key("export.gguf_type")  # the type picker's label, by kind
NO_PUSH = key("export.refuse.demo_push")
SAVED, ZIP, PUSHED = key("export.result.saved"), key("export.result.zip"), key("export.result.pushed")
JOB = "export"  # the job's kind, as studio.jobs.view words its progress
TOKEN_SET, TOKEN_UNSET = key("export.token.set"), key("export.token.unset")  # the token box's placeholder


def default_name(caller: Caller, run_id: str | None, kind: str, dtype: str) -> str:
    """The export name used when the name field is left empty: one no earlier export of the caller's workspace
    took (``<run id>-adapter``, then ``<run id>-adapter-2``, ...)."""
    return export.default_name(Path(run_id), kind, dtype, caller.workspace) if run_id else ""


def type_choice(kind: str, picked: str | None) -> tuple[tuple[str, ...], str]:
    """What the type picker offers for ``kind`` (GGUF's tensor types, or a merge's dtypes) and its value: the one
    ``picked`` when it is among them, else the default."""
    if kind in GGUF_KINDS:
        return tuple(export.GGUF_TYPES), picked if picked in export.GGUF_TYPES else export.DEFAULT_GGUF_TYPE
    return tuple(export.DTYPES), picked if picked in export.DTYPES else "float32"


def options_changed(caller: Caller, run_id: str | None, kind: str, dtype: str) -> list[Any]:
    """The type picker follows the kind (a merge's dtype, a GGUF file's type; nothing to pick for an adapter); the
    name field's placeholder shows the default name."""
    if not caller.owns_run_id(run_id):
        run_id = None
    choices, value = type_choice(kind, dtype)
    name = default_name(caller, run_id, kind, value)
    label = caller.say(GGUF_TYPE if kind in GGUF_KINDS else DTYPE)
    picker = gr.Dropdown(choices=list(choices), value=value, label=label, interactive=kind != "adapter")
    return [picker, gr.Textbox(placeholder=name)]


def run_changed(caller: Caller, run_id: str | None, kind: str, dtype: str, job_dir: str | None = None) -> list[Any]:
    """A run was picked: its weights (labelled in the caller's language), the default export name (nothing for
    another visitor's run), and the progress line emptied of an answer about the run picked before
    (``stale_outcome``)."""
    if not caller.owns_run_id(run_id):
        run_id = None
    choices = weight_choices(caller.workspace, run_id, caller.language)
    return [
        gr.Dropdown(choices=choices, value=choices[0][1] if choices else None),
        gr.Textbox(placeholder=default_name(caller, run_id, kind, dtype)),
        stale_outcome(job_dir),
    ]


def _refused(text: str) -> list[Any]:
    return [
        None,
        gr.Timer(active=False),
        message_html(text, "error"),
        *action_buttons(False),
        "",
        gr.DownloadButton(visible=False),
    ]


def start_clicked(
    caller: Caller,
    run_id: str | None,
    weights: str | None,
    kind: str,
    dtype: str,
    name: str,
    repo_id: str,
    token: str,
    private: bool,
) -> list[Any]:
    """Check the export and start it; a refusal says why (in the caller's language; the engine's reason as it
    wrote it) and starts nothing. In demo mode: only the visitor's runs, under the default name, and never to the
    hub. ``token`` is the hub token typed on the page (not the visitor's, which the caller holds)."""
    demo = caller.policy.enabled
    if not run_id:
        return _refused(caller.say(PICK_RUN))
    if demo and ((repo_id or "").strip() or (token or "").strip()):
        return _refused(caller.say(NO_PUSH))
    if demo:
        name = ""  # the name box is hidden: the export goes to the visitor's own folder under its default name
    _, picked = type_choice(kind, dtype)  # the picker holds a GGUF type for the GGUF kinds
    gguf = {"gguf_type": picked} if kind in GGUF_KINDS else {}

    def start(time_limit_s: float | None) -> Path:
        run_dir = caller.run(run_id)
        folder = demo_jobs.export_folder(caller)  # demo mode: emptied of the visitor's export before this one
        out = folder / export.default_name(run_dir, kind, picked) if folder else (name or "").strip() or None
        refusal = caller.start_refusal()  # the visitor's quota, which their export counts in
        if refusal:
            raise jobs.JobError(refusal)
        merged_dtype = "float32" if gguf else picked
        plan = export.plan_export(run_dir, kind, merged_dtype, out, checkpoint_of(weights), caller.workspace, **gguf)
        repo = export.check_repo_id(repo_id) if (repo_id or "").strip() else None
        token_given = (token or "").strip() or None
        return export.start_export(plan, push_to=repo, private=private, token=token_given, time_limit_s=time_limit_s)

    try:
        job_dir = demo_jobs.start_job(caller, start)
    except (ArtifactError, jobs.JobError, runs.RunError) as exc:
        return _refused(caller.shown(str(exc)))
    status = jobs.status(job_dir)
    hidden = gr.DownloadButton(visible=False)
    progress = progress_html(status, JOB, caller.language)
    return [str(job_dir), gr.Timer(active=True), progress, *action_buttons(True), "", hidden]


def _sentence(sentence: str, lang: str, /, **markup: str) -> str:
    """The text of the key ``sentence`` in ``lang``, escaped, with ``markup`` (HTML made here) put in for its
    placeholders."""
    words = html.escape(text(sentence, lang, **{slot: f"{{{slot}}}" for slot in markup}))
    return words.format(**markup)


def result_html(status: JobStatus, lang: str = SOURCE) -> str:
    """Where the export went, what it holds, and the hub repo it was pushed to, in ``lang``."""
    result = status.result or {}
    if not result.get("path"):
        return ""
    files = html.escape(", ".join(result.get("files") or []))
    parts = [_sentence(SAVED, lang, path=f"<code>{html.escape(result['path'])}</code>", files=files)]
    if result.get("zip"):
        parts.append(_sentence(ZIP, lang, name=f"<code>{html.escape(Path(result['zip']).name)}</code>"))
    if result.get("repo_url"):
        url = html.escape(result["repo_url"])
        parts.append(_sentence(PUSHED, lang, link=f'<a href="{url}" target="_blank">{url}</a>'))
    return f'<div class="ts-export-result">{" ".join(parts)}</div>'


def download_button(caller: Caller, archive: str | None) -> gr.DownloadButton:
    """The download of a finished export's zip (hidden without one); in demo mode a private copy of it for the
    caller."""
    if not archive or not Path(archive).is_file():
        return gr.DownloadButton(value=None, visible=False)
    copied = caller.policy.enabled
    # Gradio hands out a file from the working or temp directory or allowed_paths only; the workspace may lie
    # elsewhere, and naming exports/ in allowed_paths would serve every export to everyone.
    shown = private_copy(Path(archive), prefix="ts-export-") if copied else archive
    return gr.DownloadButton(value=str(shown), visible=True)


def poll(caller: Caller, job_dir: str | None) -> list[Any]:
    """The timer's handler: progress while the job runs; the result and the download once it is over (in demo
    mode where it went, or why it failed, as ``workspace/exports/...``: no server path). In the caller's
    language."""
    lang = caller.language
    status = job_status(job_dir)
    if status is None:
        return [None, gr.Timer(active=False), gr.skip(), *action_buttons(False), gr.skip(), gr.skip()]
    if jobs.is_running(status):
        return [job_dir, gr.skip(), progress_html(status, JOB, lang), *action_buttons(True), gr.skip(), gr.skip()]
    download = download_button(caller, (status.result or {}).get("zip"))
    return [
        None,
        gr.Timer(active=False),
        caller.shown(progress_html(status, JOB, lang)),
        *action_buttons(False),
        caller.shown(result_html(status, lang)),
        download,
    ]


def token_hint() -> Any:
    """Say whether the studio already has a token (never what it is), in the page's language."""
    return t(TOKEN_SET if os.environ.get("HF_TOKEN") else TOKEN_UNSET)


class ExportTab:
    """The Export tab's components and events."""

    def __init__(self, ctx: StudioContext):
        self.ctx = ctx
        demo = ctx.policy.enabled  # no export name (a server path) and no hub push for visitors
        if not demo:
            # Exports are served straight from disk (no copy into Gradio's cache: a merged model can be large).
            # Never in demo mode: anyone could fetch any visitor's zip by its predictable name.
            gr.set_static_paths([exports_dir(ctx.workspace)])
        with gr.Row(equal_height=False, elem_classes="ts-tool-row"):
            self.run = gr.Dropdown(
                choices=[] if demo else finished_runs(ctx.workspace),  # a visitor's own, once the tab opens
                value=None,
                label=t("jobs.run"),
                scale=3,
                elem_id="ts-export-run",
            )
            self.weights = gr.Dropdown(choices=[], label=t("jobs.weights"), scale=2, elem_id="ts-export-weights")
            self.kind = gr.Radio(
                KIND_CHOICES, value="adapter", label=t("export.kind"), scale=3, elem_id="ts-export-kind"
            )
            self.dtype = gr.Dropdown(
                list(export.DTYPES),
                value="float32",
                label=t("export.dtype"),
                interactive=False,
                scale=1,
                min_width=130,
            )
        with gr.Row(equal_height=False, elem_classes="ts-tool-row", visible=not demo):
            self.name = gr.Textbox(label=t("export.name"), scale=3, elem_id="ts-export-name")
            self.repo = gr.Textbox(
                label=t("export.repo"), placeholder=t("export.repo.placeholder"), scale=2, elem_id="ts-export-repo"
            )
            self.token = gr.Textbox(
                label=t("export.token"), type="password", placeholder=token_hint(), scale=2, elem_id="ts-export-token"
            )
            self.private = gr.Checkbox(
                label=t("export.private"), value=True, scale=1, min_width=120, elem_id="ts-export-private"
            )
        with gr.Row(equal_height=True, elem_classes="ts-tool-actions"):
            self.progress = gr.HTML(elem_classes="ts-html", elem_id="ts-export-progress", scale=5)
            self.start = gr.Button(
                t("export.start"), variant="primary", scale=0, min_width=130, elem_id="ts-export-start"
            )
            self.cancel = gr.Button(
                t("jobs.cancel"), interactive=False, scale=0, min_width=110, elem_id="ts-export-cancel"
            )
        with gr.Row(equal_height=True, elem_classes="ts-tool-actions"):
            self.result = gr.HTML(elem_classes="ts-html", elem_id="ts-export-result", scale=5)
            self.download = gr.DownloadButton(
                t("export.download"),
                visible=False,
                variant="primary",
                scale=0,
                min_width=180,
                elem_id="ts-export-download",
            )
        gr.HTML(HELP, elem_classes="ts-html")
        self.job = gr.State(None)
        self.timer = gr.Timer(POLL_SECONDS, active=False)
        self._wire()

    def _wire(self) -> None:
        private: dict[str, Any] = {"api_visibility": "private"}
        ctx = self.ctx

        # Each handler answers the caller: their runs, in the language of the page that asked.
        def cancel(caller: Caller, job: str | None) -> str:
            return cancel_job(caller, job, JOB)

        picked = ctx.inputs(self.run, self.kind, self.dtype)
        relisted = [self.weights, self.name, self.progress]
        self.run.change(ctx.handler(run_changed), [*picked, self.job], relisted, **private)
        self.name.input(stale_outcome, [self.job], [self.progress], show_progress="hidden", **private)
        for control in (self.kind, self.dtype):
            control.change(ctx.handler(options_changed), picked, [self.dtype, self.name], **private)
        outputs = [self.job, self.timer, self.progress, self.start, self.cancel, self.result, self.download]
        self.start.click(
            ctx.handler(start_clicked),
            ctx.inputs(self.run, self.weights, self.kind, self.dtype, self.name, self.repo, self.token, self.private),
            outputs,
            **private,
        ).then(ctx.handler(options_changed), picked, [self.dtype, self.name], show_progress="hidden", **private)
        # ^ the default name the next export takes: the one just started holds its own
        self.timer.tick(ctx.handler(poll), ctx.inputs(self.job), outputs, show_progress="hidden", **private)
        self.cancel.click(ctx.handler(cancel), ctx.inputs(self.job), [self.progress], **private)
        refresh_on_open(ctx, export.JOB_KIND, self.run, self.job, self.timer, self.weights)


def build_export_tab(ctx: StudioContext) -> ExportTab:
    """Build the Export tab inside the current ``gr.Tab``."""
    return ExportTab(ctx)

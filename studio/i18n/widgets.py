"""The Gradio side of the studio's languages: keys the frontend translates, the ``gr.I18n`` the page launches
with, the header's language picker and the language of a request.

A component's text is ``t("key")``: a ``I18nData`` that Gradio's frontend shows in the page's language (and
again in another when the language changes, without asking the server). Text that the server composes (a
message with a run's name in it) is ``catalog.text(key, catalog.request_language(request))``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.i18n import I18nData

from studio.i18n import catalog
from studio.path_guard import ASSETS_DIR

LANGUAGE_JS = ASSETS_DIR / "language.js"
GRADIO_ASSETS = Path(gr.__file__).parent / "templates" / "frontend" / "assets"


def t(name: str) -> I18nData:
    """``name``'s text, translated by the frontend into the page's language (the key is declared in use)."""
    return I18nData(catalog.key(name))


def marked(name: str) -> str:
    """``t(name)`` as a string: for a value sent in an update (a button's new label), and for a piece of a longer
    string (Gradio's frontend translates the first key in a string and leaves the rest as it is)."""
    return str(t(name))


def field_key(spec_path: str, part: str, root: str = "field") -> str:
    """The key of a form field's label or help (``part``), e.g. ``field.train.learning_rate.help``."""
    return f"{root}.{spec_path}.{part}"


def schema_text(name: str, english: str) -> I18nData | str:
    """A form field's or section's words: ``t(name)`` for a field of the studio's schemas, ``english`` itself for
    one the catalog does not know (a form built from another model, as a test builds)."""
    return t(name) if name in catalog.english() else english


def i18n() -> gr.I18n:
    """Every language's words for ``launch(i18n=...)``; a key a language lacks shows in English."""
    return gr.I18n(**{lang: catalog.translations(lang) for lang in catalog.LANGUAGES})


def language_picker() -> gr.Dropdown:
    """The header's language menu; assets/language.js switches the page and remembers the choice."""
    catalog.key(catalog.NAME_KEY)  # each file's own name for its language, shown as it is in every language
    return gr.Dropdown(
        choices=[(name, lang) for lang, name in catalog.LANGUAGES.items()],
        value=catalog.SOURCE,
        label=t("header.language"),  # not shown: read out by screen readers (else Gradio's English "Dropdown")
        show_label=False,
        container=False,
        min_width=120,
        scale=0,
        elem_id="ts-language",
        elem_classes=["ts-language"],
    )


def wire_language_picker(picker: gr.Dropdown, outputs: list[Any], redraw: Any) -> None:
    """Show the page's language in ``picker`` on load; on a pick, switch the page (in the browser, at once),
    remember it, then let ``redraw(lang)`` send ``outputs`` again in the new language (the text the server
    composed)."""
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    gr.on(None, None, None, picker, js="() => window.tsLanguage ? window.tsLanguage.current() : 'en'", **private)
    picker.input(
        lambda lang: redraw(lang if lang in catalog.LANGUAGES else catalog.SOURCE),
        picker,
        outputs,
        js="(lang) => window.tsLanguage ? window.tsLanguage.choose(lang) : lang",
        queue=False,
        **private,
    )


def core_module() -> str:
    """The path, under the page's ``assets/``, of the module of Gradio's frontend that exports ``changeLocale``
    (what Gradio's own settings panel switches the language with); '' when this Gradio has none."""
    for path in sorted(GRADIO_ASSETS.glob("core-*.js")):
        if "changeLocale" in path.read_text(encoding="utf-8", errors="replace"):
            return f"assets/{path.name}"
    return ""


def tab_names() -> dict[str, dict[str, str]]:
    """The name of each of the studio's tabs in every language, by the tab's id (the key ``tab.<id>``), for
    assets/language.js: Gradio's frontend names a tab anew only when it is shown, so after a switch of language
    the page script names the others."""
    ids = [name.removeprefix("tab.") for name in catalog.english() if name.startswith("tab.")]
    return {tab: {lang: catalog.text(catalog.key(f"tab.{tab}"), lang) for lang in catalog.LANGUAGES} for tab in ids}


def head_script() -> str:
    """The page script that applies the stored language and keeps the ``ts_lang`` cookie in step."""
    settings = {
        "module": core_module(),
        "languages": list(catalog.LANGUAGES),
        "cookie": catalog.COOKIE,
        "tabs": tab_names(),
    }
    return (
        f"<script>window.tsLanguageSettings = {json.dumps(settings)};</script>"
        f"<script>{LANGUAGE_JS.read_text(encoding='utf-8')}</script>"
    )

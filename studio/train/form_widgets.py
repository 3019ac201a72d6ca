"""Gradio widgets for the config form, generated from the schema (see studio.form.schema).

``ConfigForm`` renders sections where the tab's layout asks for them and keeps ``path -> component`` and
``path -> error slot`` maps. Each field sits in a small column with a hidden Markdown below it: the slot turns
visible with the field's error, so a message from ``ConfigError.by_field()`` appears next to its widget. A field
inside a group that starts collapsed (Advanced, a nested group, a closed section) has its error said again among the
lines no field shows (``error_updates``), where the layout puts them beside Start: inside a closed group it is not
seen.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gradio as gr
from pydantic import BaseModel

from engine.api import RunConfig
from studio.form.schema import FieldSpec, SectionSpec, schema_tree
from studio.form.values import default_values
from studio.i18n.catalog import SOURCE, english, text
from studio.i18n.problems import translate_problems
from studio.i18n.widgets import field_key, marked, schema_text, t

WidgetFactory = Callable[[FieldSpec, Any], gr.components.Component]

ERROR_CLASS = "ts-field-error"
PLACEHOLDER_KINDS = ("list", "modules", "mapping", "datasets")  # text fields whose placeholder says how to write them


def _step(spec: FieldSpec, value: Any) -> float:
    """A spinner step that suits the default: 1 for ints and big numbers, the leading decade for fractions."""
    if spec.kind == "int" or not isinstance(value, (int, float)) or value == 0 or abs(value) >= 1:
        return 1
    return float(f"1e{int(f'{abs(value):e}'.split('e')[1])}")


def field_words(spec: FieldSpec, root: str = "field") -> dict[str, Any]:
    """A field's label and help, in the page's language (studio.i18n: the English is the schema's)."""
    return {
        "label": schema_text(field_key(spec.path, "label", root), spec.label),
        "info": schema_text(field_key(spec.path, "help", root), spec.help) if spec.help else None,
    }


def widget_id(path: str) -> str:
    """The page's id of a field's widget (``cfg-train-max_steps``), as the page's scripts and tests find it."""
    return "cfg-" + path.replace(".", "-")


def make_widget(spec: FieldSpec, value: Any, root: str = "field", **extra: Any) -> gr.components.Component:
    """The default widget of a leaf field, showing ``value`` (a widget value); ``extra`` goes to the component
    (e.g. ``interactive=False`` for a field that is shown but fixed, or another ``label``). ``root`` names the
    schema of the field's words (studio.i18n.catalog.SCHEMA_ROOTS)."""
    common: dict[str, Any] = {
        **field_words(spec, root),
        "elem_id": widget_id(spec.path),
        **extra,
    }
    if spec.text_number:
        bounds = spec.bounds_text()
        return gr.Textbox(
            value=value,
            placeholder=f"{marked('form.empty_none')} ({bounds})" if bounds else t("form.empty_none"),
            max_lines=1,
            **common,
        )
    if spec.kind in ("int", "float"):
        return gr.Number(
            value=value,
            minimum=spec.minimum,
            maximum=spec.maximum,
            precision=0 if spec.kind == "int" else None,
            step=_step(spec, spec.default),
            **common,
        )
    if spec.kind == "choice":
        choices = [(t("form.none_choice"), "")] * spec.optional + [(str(choice), choice) for choice in spec.choices]
        return gr.Dropdown(choices=choices, value=value, **common)
    if spec.kind == "choices":  # several of fixed values; none picked is an empty list
        return gr.Dropdown(
            choices=[(str(choice), choice) for choice in spec.choices], value=value, multiselect=True, **common
        )
    if spec.kind == "bool":
        return gr.Checkbox(value=bool(value), **common)
    placeholder = f"form.placeholder.{spec.kind}" if spec.kind in PLACEHOLDER_KINDS else None
    if placeholder is None and spec.optional:
        placeholder = "form.empty_none"
    return gr.Textbox(
        value=value,
        lines=2 if spec.kind == "mapping" else 1,
        max_lines=12,
        max_length=spec.max_length,
        placeholder=t(placeholder) if placeholder else None,
        **common,
    )


class ConfigForm:
    """The schema's widgets, rendered section by section wherever the layout calls ``render_section``."""

    def __init__(
        self,
        model: type[BaseModel] = RunConfig,
        overrides: Mapping[str, WidgetFactory] | None = None,
        initial: Mapping[str, Any] | None = None,
    ):
        """``initial`` holds the widget values to show first (default: the model's defaults)."""
        self.model = model
        self.tree = schema_tree(model)
        self.specs = self.tree.leaves()
        self.paths = [spec.path for spec in self.specs]
        self.overrides = dict(overrides or {})
        self.components: dict[str, gr.components.Component] = {}
        self.error_slots: dict[str, gr.Markdown] = {}
        self.advanced_paths: set[str] = set()  # the fields rendered inside an "Advanced" accordion
        # The fields rendered inside a group that starts collapsed: path -> the headings around it (keys, or the
        # words of a schema the catalog does not know), outermost first.
        self.collapsed: dict[str, tuple[str, ...]] = {}
        self._headings: list[tuple[str, bool]] = []  # the groups being rendered: (heading, starts open)
        self._defaults = dict(initial) if initial is not None else default_values(model)
        self._after_write: Callable[[Any], Any] | None = None

    def initial(self, path: str) -> Any:
        """The widget value a field shows first (rendered or not yet)."""
        return self._defaults[path]

    # --- rendering ----------------------------------------------------------------------------------------

    def section(self, path: str) -> SectionSpec:
        """The section at a dotted path ("" for the root)."""
        node = self.tree
        for part in filter(None, path.split(".")):
            sections = {c.path.rsplit(".", 1)[-1]: c for c in node.children if isinstance(c, SectionSpec)}
            if part not in sections:
                raise KeyError(f"no config section {path!r}")
            node = sections[part]
        return node

    def render_section(
        self, path: str, columns: int = 1, open: bool = True, title: str | None = None, hideable: bool = False
    ) -> None:
        """Render one section: its basic fields in rows of ``columns``, an Advanced accordion, nested groups.
        ``title`` is the key of a heading other than the section's name. A ``hideable`` section (one the layout
        hides at times) has its fields' errors said again beside Start, as those of a collapsed group are."""
        spec = self.section(path)
        name = title or field_key(path, "label")
        heading = t(title) if title else schema_text(name, spec.title)
        shown = open and not hideable
        with gr.Accordion(heading, open=open, elem_classes=["ts-section"]), self.within(name, shown, spec.title):
            if spec.help:
                gr.Markdown(schema_text(field_key(path, "help"), spec.help), elem_classes=["ts-section-help"])
            self.render_children(spec, columns)

    def render_children(self, spec: SectionSpec, columns: int = 1) -> None:
        """Render a section's fields (without a heading); nested models become their own collapsed group."""
        fields = [c for c in spec.children if isinstance(c, FieldSpec) and c.path not in self.components]
        self._grid([f for f in fields if not f.advanced], columns)
        for child in spec.children:
            if isinstance(child, SectionSpec) and not self._all_rendered(child):
                name = field_key(child.path, "label")
                with gr.Accordion(schema_text(name, child.title), open=False), self.within(name, False, child.title):
                    if child.help:
                        gr.Markdown(
                            schema_text(field_key(child.path, "help"), child.help), elem_classes=["ts-section-help"]
                        )
                    self.render_children(child, columns=max(columns, 2))
        advanced = [f for f in fields if f.advanced]
        if advanced:
            accordion = gr.Accordion(t("form.advanced"), open=False, elem_classes=["ts-advanced"])
            with accordion, self.within("form.advanced", open=False):
                self._grid(advanced, columns)
                self.advanced_paths.update(f.path for f in advanced)

    @contextlib.contextmanager
    def within(self, heading: str, open: bool = True, words: str = "") -> Iterator[None]:
        """Fields rendered inside are in a group under ``heading`` (a key; ``words`` where the catalog lacks it)
        that starts ``open`` or collapsed: the layout says so for the groups it builds itself."""
        self._headings.append((heading if heading in english() or not words else words, open))
        try:
            yield
        finally:
            self._headings.pop()

    def render_fields(self, paths: Sequence[str], columns: int = 1) -> None:
        """Render chosen leaf fields here (e.g. the run name beside the Start button)."""
        self._grid([s for s in self.specs if s.path in paths and s.path not in self.components], columns)

    def render_rest(self, columns: int = 2, skip: Sequence[str] = ()) -> None:
        """Render every field the layout did not place: a new section or field shows up without a layout edit.

        ``skip`` holds top-level fields the layout renders later, elsewhere.
        """
        for child in self.tree.children:
            if isinstance(child, SectionSpec) and not self._all_rendered(child):
                self.render_section(child.path, columns)
            elif isinstance(child, FieldSpec) and child.path not in self.components and child.path not in skip:
                self._grid([child], columns)

    def _all_rendered(self, section: SectionSpec) -> bool:
        return all(leaf.path in self.components for leaf in section.leaves())

    def _grid(self, specs: list[FieldSpec], columns: int) -> None:
        for start in range(0, len(specs), columns):
            with gr.Row(equal_height=False):
                for spec in specs[start : start + columns]:
                    self._field(spec)

    def _field(self, spec: FieldSpec) -> None:
        with gr.Column(min_width=180, elem_classes=["ts-field"]):
            factory = self.overrides.get(spec.path, make_widget)
            self.components[spec.path] = factory(spec, self._defaults[spec.path])
            if not all(open for _, open in self._headings):
                self.collapsed[spec.path] = tuple(heading for heading, _ in self._headings)
            self.error_slots[spec.path] = gr.Markdown(
                visible=False, elem_classes=[ERROR_CLASS], elem_id=widget_id(spec.path) + "-error"
            )

    # --- event plumbing -------------------------------------------------------------------------------------

    @property
    def inputs(self) -> list[gr.components.Component]:
        """Every field's component, in schema order (the order of ``values`` arguments)."""
        return [self.components[path] for path in self.paths]

    @property
    def slots(self) -> list[gr.Markdown]:
        """Every field's error slot, in schema order."""
        return [self.error_slots[path] for path in self.paths]

    def values(self, args: Sequence[Any]) -> dict[str, Any]:
        """Positional event arguments (in ``inputs`` order) as path -> widget value."""
        return dict(zip(self.paths, args, strict=True))

    def follow_writes(self, chain: Callable[[Any], Any]) -> None:
        """Set what ``after_write`` chains onto an event that writes the form's values (the Train tab's preview)."""
        self._after_write = chain

    def after_write(self, event: Any) -> Any:
        """Chain onto ``event``, one whose outputs write the form's values (a loaded config, a restored form, a
        method's fit, a run to continue), what follows such a write: one live preview for the whole write. The
        preview follows the visitor's own ``input`` events, not ``change``: a change fires once per field, so a
        loaded preset sent up to fifteen previews, and each event costs the page a walk of its whole component tree
        per input and output (Gradio 6's frontend): 12-23 s before a preset's method section showed."""
        return self._after_write(event) if self._after_write is not None else event

    def value_updates(self, values: Mapping[str, Any]) -> list[Any]:
        """Outputs for ``inputs`` that show ``values``; paths not given are left as they are."""
        return [values[path] if path in values else gr.skip() for path in self.paths]

    def error_updates(self, errors: Mapping[str, str], lang: str = SOURCE) -> tuple[list[dict[str, Any]], list[str]]:
        """Outputs for ``slots`` showing ``errors`` (path -> message, said in ``lang`` where the studio can) and
        hiding the rest; plus the lines no visible field shows: problems of no field, then those of a field in a
        collapsed group, each after where the field is (``Training › Advanced › Eval batch size: ...``)."""
        placed, unplaced = place_errors(translate_problems(dict(errors), lang), self.paths)
        hidden = [
            f"{self.where(path, lang)}: {placed[path]}"
            for path in self.paths
            if path in placed.keys() & self.collapsed.keys()
        ]
        return [error_slot_update(placed.get(path)) for path in self.paths], unplaced + hidden

    def where(self, path: str, lang: str = SOURCE) -> str:
        """Where a field sits, in ``lang``: the headings of the groups around it, then its label."""
        label = field_key(path, "label")
        if label not in english():  # a form of another schema (a test's)
            label = next(spec.label for spec in self.specs if spec.path == path)
        names = [*self.collapsed.get(path, ()), label]
        return " › ".join(text(name, lang) if name in english() else name for name in names)


def error_slot_update(message: str | None) -> dict[str, Any]:
    """An error slot that shows ``message``, or a hidden one."""
    if not message:
        return gr.update(value="", visible=False)
    text = html.escape(message)
    return gr.update(value=f'<span style="color:var(--error-text-color,#dc2626)">⚠ {text}</span>', visible=True)


def place_errors(errors: Mapping[str, str], paths: list[str]) -> tuple[dict[str, str], list[str]]:
    """Split ``ConfigError.by_field()`` into messages for a widget path and lines that belong to no widget.

    A problem inside a field (``adapter.modules_to_save.0``) goes to that field's widget.
    """
    placed: dict[str, str] = {}
    unplaced = []
    for where, message in errors.items():
        owner = next((p for p in paths if where == p or where.startswith(p + ".")), None)
        if owner is None:
            unplaced.append(f"{where}: {message}" if where else message)
        else:
            placed[owner] = f"{placed[owner]}; {message}" if owner in placed else message
    return placed, unplaced

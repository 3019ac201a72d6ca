"""What every tab of the studio shares: the workspace, the components that link the tabs, and how an event
handler is wired to them (``handler``: the event's ``Caller`` built once, studio.demo.caller)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import gradio as gr

from studio.demo.caller import Caller
from studio.demo.policy import NORMAL, DemoPolicy
from studio.i18n.catalog import request_language

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class StudioContext:
    """Shared by the tab builders.

    ``current_run`` is a ``gr.State`` holding the run directory (str) the Monitor shows; the Train tab sets it
    when it starts a run, the Runs tab when a run is picked. ``tabs`` is the ``gr.Tabs`` container, whose
    ``selected`` the handlers set (by tab id: "train", "monitor", "runs") to switch the page to a tab.
    ``policy`` says what visitors may do (studio.demo.policy; no limits outside demo mode) and ``visitor`` is the
    component holding the visitor id (a ``gr.BrowserState`` in demo mode, else a ``gr.State(None)``: nobody in
    particular): handlers take it as an input and ask the policy whose runs to show. ``train_form`` is set once
    the Train tab is built (the Runs tab's "Continue from this run" fills it). ``opened`` is the ``gr.Tab`` that
    the builder given this context fills (the app hands each tab builder a copy with its own). The app makes these
    components (studio.app).
    """

    workspace: Path
    current_run: Any = None  # gr.State[str | None]
    tabs: Any = None  # gr.Tabs
    policy: DemoPolicy = NORMAL
    visitor: Any = None  # gr.BrowserState[str | None] or gr.State(None)
    train_form: Any = None  # the Train tab's studio.train.form_widgets.ConfigForm, which other tabs may fill
    opened: Any = None  # gr.Tab: the tab being built

    def on_open(self) -> Any:
        """The event listener for "this tab came on screen", for what a tab refreshes as it opens: its own tab's
        ``select`` (a click on it; the app switches by itself only to Train and Monitor); without one, the tabs'
        ``change`` (any switch); None for a tab built alone (tests).

        Every Gradio event costs the browser 65 ms or more of its main thread, so a handler on the tabs' change,
        which runs on every switch, made each switch (Start's to the Monitor too) pay for every tab's refresh.
        """
        if self.opened is not None:
            return self.opened.select
        return self.tabs.change if self.tabs is not None else None

    def tick_while_shown(self, timer: Any, resume: bool = True) -> None:
        """Stop ``timer`` (a ``gr.Timer`` of the tab being built) whenever another tab comes on screen; start it
        again as its own tab comes back when ``resume`` (else the tab's own opening sets it). Gradio starts a tab's
        timer as the tab first shows and never stops it: a page that had opened the Runs tab sent its list every
        2 s while the visitor watched the Monitor, each an event that costs the page's main thread. The page reads
        which tab is shown from the tab buttons (a script, no server event), once the switch is drawn."""
        if self.tabs is None or self.opened is None or not self.opened.elem_id:
            return
        button = json.dumps(f"#{self.opened.elem_id}-button")
        shown = "{__type__: 'update', active: true}" if resume else "{__type__: 'update'}"
        script = f"""async () => {{
          await new Promise((drawn) => setTimeout(drawn, 0));
          const button = document.querySelector({button});
          return button?.getAttribute('aria-selected') === 'true' ? {shown} : {{__type__: 'update', active: false}};
        }}"""
        # The tabs' change: clicks and the app's own switches alike.
        self.tabs.change(None, None, timer, js=script, api_visibility="private")

    def caller(self, request: Any, token: str | None) -> Caller:
        """The ``Caller`` of an event: this studio's workspace and policy, the visitor's token, the language of
        the page that sent ``request`` (a ``gr.Request``)."""
        return Caller(self.workspace, self.policy, token, request_language(request))

    def handler(self, fn: Callable[Concatenate[Caller, P], R]) -> Callable[..., R]:
        """``fn(caller, *values)`` as a Gradio event handler whose inputs are ``[ctx.visitor, *values]``: the
        caller is built once, from the request and the visitor's token, before ``fn`` runs. A generator stays a
        generator (Gradio streams what it yields).
        """
        if inspect.isgeneratorfunction(fn):

            def streamed(request: Any, token: str | None, *values: Any) -> Any:
                yield from fn(self.caller(request, token), *values)  # type: ignore[arg-type]

            wrapped: Callable[..., Any] = streamed
        else:

            def wrapped(request: Any, token: str | None, *values: Any) -> Any:
                return fn(self.caller(request, token), *values)  # type: ignore[arg-type]

        # Gradio hands the request to the parameter annotated gr.Request (gradio.helpers.special_args); the name
        # is fn's, which Gradio shows for the event. No __wrapped__: inspect.signature would follow it to fn's
        # own parameters, and Gradio would then not see the request parameter.
        wrapped.__annotations__ = {"request": gr.Request}
        wrapped.__name__, wrapped.__qualname__, wrapped.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        return wrapped

    def inputs(self, *components: Any) -> list[Any]:
        """The inputs of a ``handler``: the visitor's component, then ``components``."""
        return [self.visitor, *components]

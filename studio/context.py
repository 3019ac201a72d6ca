"""What every tab of the studio shares: the workspace and the components that link the tabs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studio.demo.policy import NORMAL, DemoPolicy


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
    components (studio.app); this module stays free of Gradio so the plain handlers can import it.
    """

    workspace: Path
    current_run: Any = None  # gr.State[str | None]
    tabs: Any = None  # gr.Tabs
    policy: DemoPolicy = NORMAL
    visitor: Any = None  # gr.BrowserState[str | None] or gr.State(None)
    train_form: Any = None  # the Train tab's studio.form.widgets.ConfigForm, which other tabs may fill
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

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
    the Train tab is built (the Runs tab's "Continue from this run" fills it). The app makes these components
    (studio.app); this module stays free of Gradio so the plain handlers can import it.
    """

    workspace: Path
    current_run: Any = None  # gr.State[str | None]
    tabs: Any = None  # gr.Tabs
    policy: DemoPolicy = NORMAL
    visitor: Any = None  # gr.BrowserState[str | None] or gr.State(None)
    train_form: Any = None  # the Train tab's studio.form.widgets.ConfigForm, which other tabs may fill

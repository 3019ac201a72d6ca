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
    component holding the visitor id (a ``gr.BrowserState`` in demo mode): handlers take it as an input and ask
    the policy whose runs to show.
    """

    workspace: Path
    current_run: Any = None  # gr.State[str | None]
    tabs: Any = None  # gr.Tabs
    policy: DemoPolicy = NORMAL
    visitor: Any = None  # gr.BrowserState[str | None] or gr.State(None)

    def visitor_input(self) -> Any:
        """The visitor component for a handler's inputs; a ``gr.State(None)`` (nobody in particular) is made on
        first use when the app gave none. Call it while building the page."""
        if self.visitor is None:
            import gradio as gr  # here: the context is importable without the UI toolkit

            self.visitor = gr.State(None)
        return self.visitor

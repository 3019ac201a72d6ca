"""What every tab of the studio shares: the workspace and the components that link the tabs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class StudioContext:
    """Shared by the tab builders.

    ``current_run`` is a ``gr.State`` holding the run directory (str) the Monitor shows; the Train tab sets it
    when it starts a run, the Runs tab when a run is picked. ``tabs`` is the ``gr.Tabs`` container, whose
    ``selected`` the handlers set (by tab id: "train", "monitor", "runs") to switch the page to a tab.
    """

    workspace: Path
    current_run: Any = None  # gr.State[str | None]
    tabs: Any = None  # gr.Tabs

    @property
    def runs_dir(self) -> Path:
        """Where this workspace's runs live."""
        return self.workspace / "runs"
